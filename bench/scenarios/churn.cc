#include "bench/scenarios/churn.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "bench/scenarios/bench_models.h"
#include "bench/scenarios/churn_run.h"
#include "engine/engine.h"

namespace kvault::bench {
namespace {

constexpr char kPagedSpill[] = "paged+spill";

Status ValidateChurn(const ChurnOptions& o) {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("churn: " + what);
  };
  if (o.num_slots == 0 || o.num_turns == 0 || o.num_gen == 0 ||
      o.threads == 0 || o.page_size == 0) {
    return bad("slots, turns, gen, threads and page size must be > 0");
  }
  if (o.num_sessions <= o.num_slots) {
    return bad("need more sessions (" + std::to_string(o.num_sessions) +
               ") than slots (" + std::to_string(o.num_slots) + ")");
  }
  if (o.min_user == 0 || o.min_user > o.max_user) {
    return bad("user message range must be 1 <= min <= max");
  }
  const auto [min_prompt, max_prompt] = ChurnPromptRange(o);
  if (min_prompt == 0 || min_prompt > max_prompt ||
      uint64_t{max_prompt} + o.max_user + o.num_gen + 1 > o.ctx_per_slot) {
    return bad("prompt " + std::to_string(min_prompt) + ".." +
               std::to_string(max_prompt) + " + user " +
               std::to_string(o.max_user) + " + gen " +
               std::to_string(o.num_gen) + " must fit ctx-per-slot " +
               std::to_string(o.ctx_per_slot));
  }
  if (o.num_cells / 2 < o.ctx_per_slot) {
    return bad("cells / 2 (" + std::to_string(o.num_cells / 2) +
               ", paged+spill's pool) must hold one slot's ctx " +
               std::to_string(o.ctx_per_slot));
  }
  return Status::Ok();
}

// The engine options and harness behaviour of configuration `config`.
StatusOr<std::pair<EngineOptions, ChurnBehaviour>> ConfigFor(
    const ChurnOptions& o, const std::string& config, uint64_t cell_bytes) {
  EngineOptions e;
  e.n_ctx_total = o.num_cells;
  e.n_slots = o.num_slots;
  e.ctx_per_slot = o.ctx_per_slot;
  e.page_size = o.page_size;
  e.num_threads = o.threads;
  e.compute = o.compute;
  e.sync_saves = false;  // llama-server does not fsync slot files either
  // Every turn ends saved to its session's file, so a slot's idle KV is
  // only a cache of it: dropping it for room loses nothing (as the figures
  // before --on-kv-full measured).
  e.on_kv_full = OnKvFull::kDropLru;
  ChurnBehaviour b;
  if (config == "contiguous") {
    e.kv_policy = KvPolicy::kContiguous;
  } else if (config == "contiguous+shrink") {
    e.kv_policy = KvPolicy::kContiguous;
    b.shrink = true;
  } else if (config == "contiguous+defrag") {
    e.kv_policy = KvPolicy::kContiguousDefrag;
    b.explicit_defrag = true;
  } else if (config == "paged") {
    e.kv_policy = KvPolicy::kPaged;
  } else if (config == kPagedSpill) {
    e.kv_policy = KvPolicy::kPaged;
    e.n_ctx_total = o.num_cells / 2;
    // Room for every slot's KV twice over (files carry a header and index).
    e.spill_ram_bytes = 2ull * o.num_slots * o.ctx_per_slot * cell_bytes;
    b.wait_on_no_room = true;
  } else {
    return InvalidArgumentError("churn: unknown configuration \"" + config +
                                "\"");
  }
  return std::make_pair(e, b);
}

StatusOr<std::string> MakeChurnDir(const std::string& dir) {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IOError("churn: mkdir " + dir + ": " + ec.message());
    return dir;
  }
  char templ[] = "/tmp/kvault-churn-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    return IOError(std::string("churn: mkdtemp ") + templ + " failed, errno " +
                   std::to_string(errno));
  }
  return std::string(templ);
}

void ReadEngineCounters(const EngineMetrics& m, ChurnResult* r) {
  r->evictions = m.vault.evictions;
  for (const TierStats& tier : m.vault.tiers) {
    r->spilled_bytes += tier.spilled_bytes;
  }
  r->preemptions = m.preemptions;
  r->idle_kv_discards = m.idle_kv_discards;
}

}  // namespace

std::pair<uint32_t, uint32_t> ChurnPromptRange(const ChurnOptions& o) {
  const uint64_t turn = uint64_t{o.max_user} + o.num_gen + 1;
  const uint32_t longest =
      o.ctx_per_slot > turn ? static_cast<uint32_t>(o.ctx_per_slot - turn) : 0;
  return {o.min_prompt ? o.min_prompt : o.ctx_per_slot / 2,
          o.max_prompt ? o.max_prompt : longest};
}

const std::vector<std::string>& ChurnConfigNames() {
  static const std::vector<std::string> kNames = {
      "contiguous", "contiguous+shrink", "contiguous+defrag", "paged",
      kPagedSpill};
  return kNames;
}

StatusOr<ChurnResult> RunChurnConfig(const ChurnOptions& o,
                                     const std::string& config) {
  KV_RETURN_IF_ERROR(ValidateChurn(o));
  std::unique_ptr<LlamaModel> model;
  if (o.make_model) {
    KV_ASSIGN_OR_RETURN(model, o.make_model());
  } else {
    KV_ASSIGN_OR_RETURN(model, LoadModelOrSmall(o.model_path, o.compute.isa));
  }
  const uint64_t cell_bytes = model->KvLayoutFor(KvDtype::kF16).cell_bytes();
  KV_ASSIGN_OR_RETURN(auto setup, ConfigFor(o, config, cell_bytes));
  KV_ASSIGN_OR_RETURN(std::string dir, MakeChurnDir(o.dir));
  StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(std::move(model), setup.first);
  ChurnResult result;
  result.config = config;
  result.kv_policy = KvPolicyName(setup.first.kv_policy);
  result.num_cells = setup.first.n_ctx_total;
  Status status = engine.status();
  if (status.ok()) {
    ChurnRun run(engine->get(), o, setup.second, dir);
    status = run.Run(&result);
    ReadEngineCounters((*engine)->Metrics(), &result);
    (*engine)->Shutdown();
  }
  std::error_code ec;
  if (o.dir.empty()) std::filesystem::remove_all(dir, ec);
  KV_RETURN_IF_ERROR(status.WithContext("churn " + config));
  return result;
}

StatusOr<std::vector<ChurnResult>> RunChurn(const ChurnOptions& o) {
  KV_RETURN_IF_ERROR(ValidateChurn(o));
  const std::vector<std::string>& configs =
      o.configs.empty() ? ChurnConfigNames() : o.configs;
  for (const std::string& config : configs) {
    const auto& names = ChurnConfigNames();
    if (std::find(names.begin(), names.end(), config) == names.end()) {
      return InvalidArgumentError("churn: unknown configuration \"" + config +
                                  "\"");
    }
  }
  std::vector<ChurnResult> results;
  for (const std::string& config : configs) {
    KV_ASSIGN_OR_RETURN(ChurnResult r, RunChurnConfig(o, config));
    results.push_back(std::move(r));
  }
  return results;
}

std::string ChurnJson(const ChurnResult& r) {
  nlohmann::ordered_json j;
  j["config"] = r.config;
  j["kv_policy"] = r.kv_policy;
  j["slots"] = r.num_slots;
  j["cells"] = r.num_cells;
  j["turns"] = r.num_turns;
  j["restore_attempts"] = r.restore_attempts;
  j["restore_ok"] = r.restore_ok;
  j["restore_waits"] = r.restore_waits;
  j["restore_success_rate"] = r.restore_success_rate;
  j["slot_usage"] = r.slot_usage;
  j["final_active_slots"] = r.final_active_slots;
  j["pool_utilization"] = r.pool_utilization;
  // Statistics of an empty sample are null, not 0.
  auto sampled = [](uint64_t n, double v) {
    return n == 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
  };
  j["restore_ms_p50"] = sampled(r.restore_ok, r.restore_ms_p50);
  j["restore_ms_p99"] = sampled(r.restore_ok, r.restore_ms_p99);
  j["defrag_ms_total"] = r.defrag_ms_total;
  j["num_defrags"] = r.num_defrags;
  j["cells_moved"] = r.cells_moved;
  j["recompute_turns"] = r.recompute_turns;
  j["new_conversations"] = r.new_conversations;
  j["failed_turns"] = r.failed_turns;
  j["lost_saves"] = r.lost_saves;
  j["generated_tokens"] = r.generated_tokens;
  j["wall_s"] = r.wall_s;
  j["gen_tok_s"] = r.gen_tok_s;
  j["ttft_ms_p50"] = r.ttft_ms_p50;
  j["ttft_ms_p99"] = r.ttft_ms_p99;
  j["ttft_restored_ms_p50"] = sampled(r.restore_ok, r.ttft_restored_ms_p50);
  j["ttft_recomputed_ms_p50"] =
      sampled(r.recompute_turns, r.ttft_recomputed_ms_p50);
  j["evictions"] = r.evictions;
  j["spilled_bytes"] = r.spilled_bytes;
  j["preemptions"] = r.preemptions;
  j["idle_kv_discards"] = r.idle_kv_discards;
  return j.dump();
}

}  // namespace kvault::bench
