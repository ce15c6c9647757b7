#include "bench/scenarios/alloc_churn.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace kvault::bench {
namespace {

Status Validate(const AllocChurnOptions& o) {
  if (o.num_slots == 0 || o.num_sessions <= o.num_slots) {
    return InvalidArgumentError(
        "alloc-churn: need sessions > slots >= 1, got slots=" +
        std::to_string(o.num_slots) +
        " sessions=" + std::to_string(o.num_sessions));
  }
  uint64_t unit = uint64_t{o.num_slots} * o.page_size * 4;
  if (o.num_cells == 0 || o.num_cells % unit != 0) {
    return InvalidArgumentError(
        "alloc-churn: --cells must be a positive multiple of 4 * slots * "
        "page_size = " + std::to_string(unit) + ", got " +
        std::to_string(o.num_cells));
  }
  return Status::Ok();
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  size_t k = static_cast<size_t>(q * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

// Drives one run; split out of RunAllocChurn to keep both short.
class ChurnDriver {
 public:
  ChurnDriver(const AllocChurnOptions& o, KvCache* cache)
      : o_(o), cache_(cache), rng_(o.seed), slot_session_(o.num_slots),
        slot_limit_(o.num_slots), max_len_(o.num_cells / o.num_slots) {
    std::uniform_int_distribution<uint64_t> len(max_len_ / 4, max_len_ - 1);
    for (uint32_t i = 0; i < o.num_sessions; ++i) {
      session_len_.push_back(len(rng_));
    }
    session_loaded_.assign(o.num_sessions, false);
    tokens_.resize(max_len_);
  }

  AllocChurnResult Run() {
    double busy_sum = 0, used_sum = 0;
    for (uint64_t step = 0; step < o_.num_steps; ++step) {
      // The driver wants every slot busy: each free slot gets a restore.
      for (uint32_t slot = 0; slot < o_.num_slots; ++slot) {
        if (!slot_session_[slot] && num_busy_ < slot_limit_) Restore(slot);
      }
      busy_sum += num_busy_;
      used_sum += static_cast<double>(used_cells_);
      // Then one random slot may finish its turn: grow, save, free.
      uint32_t slot = static_cast<uint32_t>(rng_() % o_.num_slots);
      if (slot_session_[slot] && rng_() % 2 == 0) Finish(slot);
    }
    return Summarize(busy_sum, used_sum);
  }

 private:
  std::span<const TokenPos> Tokens(uint64_t first_pos, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      tokens_[i] = TokenPos{static_cast<TokenId>(i % 32000),
                            static_cast<Pos>(first_pos + i)};
    }
    return {tokens_.data(), count};
  }

  void Restore(uint32_t slot) {
    uint32_t session;
    do {
      session = static_cast<uint32_t>(rng_() % o_.num_sessions);
    } while (session_loaded_[session]);
    uint64_t len = session_len_[session];
    auto tokens = Tokens(0, len);
    auto t0 = std::chrono::steady_clock::now();
    auto cells = cache_->Append(SeqId(slot), tokens);
    auto t1 = std::chrono::steady_clock::now();
    alloc_ns_.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    ++restores_;
    if (!cells.ok()) {
      ++restore_failures_;
      if (o_.policy == "contiguous+shrink" && slot_limit_ > 1) --slot_limit_;
      return;
    }
    slot_session_[slot] = session;
    session_loaded_[session] = true;
    ++num_busy_;
    used_cells_ += len;
  }

  // The slot generated a few tokens (up to 5% growth), saves and frees.
  void Finish(uint32_t slot) {
    uint32_t session = *slot_session_[slot];
    uint64_t len = session_len_[session];
    uint64_t grow = std::min<uint64_t>(rng_() % (len / 20 + 1), max_len_ - len);
    if (grow > 0) {
      if (cache_->Append(SeqId(slot), Tokens(len, grow)).ok()) {
        session_len_[session] += grow;
      } else {
        ++growth_failures_;
      }
    }
    cache_->RemoveSequence(SeqId(slot));
    used_cells_ -= len;
    session_loaded_[session] = false;
    slot_session_[slot].reset();
    --num_busy_;
  }

  AllocChurnResult Summarize(double busy_sum, double used_sum) const {
    AllocChurnResult r;
    r.policy = o_.policy;
    r.page_size = o_.page_size;
    r.restores = restores_;
    r.restore_failures = restore_failures_;
    r.growth_failures = growth_failures_;
    r.success_rate = restores_ == 0 ? 1.0
        : 1.0 - static_cast<double>(restore_failures_) / restores_;
    double steps = static_cast<double>(std::max<uint64_t>(o_.num_steps, 1));
    r.slot_usage = busy_sum / steps / o_.num_slots;
    r.mean_utilization = used_sum / steps / static_cast<double>(o_.num_cells);
    r.defrag_runs = cache_->counters().defrag_runs;
    r.cells_moved = cache_->counters().cells_moved;
    r.alloc_ns_p50 = Percentile(alloc_ns_, 0.50);
    r.alloc_ns_p99 = Percentile(alloc_ns_, 0.99);
    r.final_slot_limit = slot_limit_;
    return r;
  }

  const AllocChurnOptions& o_;
  KvCache* cache_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> session_len_;
  std::vector<bool> session_loaded_;
  std::vector<std::optional<uint32_t>> slot_session_;
  std::vector<TokenPos> tokens_;
  std::vector<double> alloc_ns_;
  uint32_t slot_limit_;
  uint32_t num_busy_ = 0;
  uint64_t max_len_;
  uint64_t used_cells_ = 0;
  uint64_t restores_ = 0, restore_failures_ = 0, growth_failures_ = 0;
};

}  // namespace

StatusOr<AllocChurnResult> RunAllocChurn(const AllocChurnOptions& o) {
  KV_RETURN_IF_ERROR(Validate(o));
  KvCacheOptions cache_options;
  cache_options.num_pages = static_cast<uint32_t>(o.num_cells / o.page_size);
  cache_options.page_size = o.page_size;
  // contiguous+shrink is this benchmark's workaround, placed as contiguous.
  KV_ASSIGN_OR_RETURN(
      cache_options.policy,
      ParseKvPolicy(o.policy == "contiguous+shrink" ? "contiguous" : o.policy));
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      KvCache::Create(cache_options));
  ChurnDriver driver(o, cache.get());
  return driver.Run();
}

std::string AllocChurnJson(const AllocChurnResult& r) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["restores"] = r.restores;
  j["restore_failures"] = r.restore_failures;
  j["success_rate"] = r.success_rate;
  j["slot_usage"] = r.slot_usage;
  j["mean_utilization"] = r.mean_utilization;
  j["defrag_runs"] = r.defrag_runs;
  j["cells_moved"] = r.cells_moved;
  j["alloc_ns_p50"] = r.alloc_ns_p50;
  j["alloc_ns_p99"] = r.alloc_ns_p99;
  return j.dump();
}

}  // namespace kvault::bench
