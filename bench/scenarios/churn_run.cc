#include "bench/scenarios/churn_run.h"

#include <algorithm>
#include <filesystem>
#include <utility>

namespace kvault::bench {
namespace {

using Clock = ChurnRun::Clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest-rank (lower) percentile; 0 for no samples.
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

bool IsNoRoom(const Status& status) {
  return status.IsResourceExhausted() && status.reason() == "no_room";
}

// One request's output: when its first token came and how it ended.
class TurnSink : public CompletionSink {
 public:
  bool OnToken(const TokenEvent&) override {
    if (!first_token_) first_token_ = Clock::now();
    return true;
  }
  void OnDone(const StatusOr<CompletionResult>& result) override {
    done_.set_value(result);  // publishes first_token_ to the waiter
  }
  std::future<StatusOr<CompletionResult>> Future() {
    return done_.get_future();
  }
  // Valid once the future is ready.
  std::optional<Clock::time_point> first_token() const { return first_token_; }

 private:
  std::optional<Clock::time_point> first_token_;
  std::promise<StatusOr<CompletionResult>> done_;
};

}  // namespace

struct ChurnRun::Flight {
  uint64_t turn = 0;
  uint32_t conversation = 0;
  TurnKind kind = TurnKind::kNew;
  Clock::time_point start;       // turn start: before erase and restore
  std::vector<TokenId> prompt;   // history + the user message
  std::shared_ptr<TurnSink> sink;
  std::future<StatusOr<CompletionResult>> done;
};

ChurnRun::ChurnRun(Engine* engine, const ChurnOptions& options,
                   ChurnBehaviour behaviour, std::string dir)
    : engine_(engine),
      options_(options),
      behaviour_(behaviour),
      dir_(std::move(dir)),
      rng_(options.seed),
      n_vocab_(engine->model().n_vocab()),
      min_prompt_(ChurnPromptRange(options).first),
      max_prompt_(ChurnPromptRange(options).second),
      conversations_(options.num_sessions),
      slots_(options.num_slots),
      active_slots_(options.num_slots) {
  for (size_t i = 0; i < conversations_.size(); ++i) {
    conversations_[i].path = dir_ + "/conv-" + std::to_string(i) + ".kvstate";
  }
}

Status ChurnRun::Run(ChurnResult* result) {
  result_ = result;
  result->num_slots = options_.num_slots;
  result->num_turns = options_.num_turns;
  const Clock::time_point t0 = Clock::now();
  Status status = Status::Ok();
  for (uint32_t t = 0; t < options_.num_turns && status.ok(); ++t) {
    status = Turn();
  }
  if (status.ok()) status = FinishAll();
  const double wall_s = MsBetween(t0, Clock::now()) / 1000;
  for (const Conversation& c : conversations_) {
    std::error_code ec;
    std::filesystem::remove(c.path, ec);
  }
  KV_RETURN_IF_ERROR(status);
  result->wall_s = wall_s;
  result->gen_tok_s = wall_s > 0 ? result->generated_tokens / wall_s : 0;
  result->restore_success_rate =
      result->restore_attempts == 0
          ? 1.0
          : static_cast<double>(result->restore_ok) / result->restore_attempts;
  const double slot_turns =
      static_cast<double>(options_.num_slots) * options_.num_turns;
  result->slot_usage = static_cast<double>(active_sum_) / slot_turns;
  result->final_active_slots = active_slots_;
  result->pool_utilization =
      num_samples_ ? utilization_sum_ / static_cast<double>(num_samples_) : 0;
  result->restore_ms_p50 = Percentile(restore_ms_, 0.5);
  result->restore_ms_p99 = Percentile(restore_ms_, 0.99);
  result->ttft_ms_p50 = Percentile(ttft_ms_, 0.5);
  result->ttft_ms_p99 = Percentile(ttft_ms_, 0.99);
  result->ttft_restored_ms_p50 = Percentile(ttft_restored_ms_, 0.5);
  result->ttft_recomputed_ms_p50 = Percentile(ttft_recomputed_ms_, 0.5);
  return Status::Ok();
}

Status ChurnRun::Turn() {
  KV_RETURN_IF_ERROR(RetireInactiveSlots());
  active_sum_ += active_slots_;
  const uint32_t slot = static_cast<uint32_t>(cursor_++ % active_slots_);
  KV_RETURN_IF_ERROR(Finish(slot));
  const uint32_t c = PickConversation();
  const Clock::time_point start = Clock::now();
  KV_RETURN_IF_ERROR(EraseSlot(slot));
  TurnKind kind = TurnKind::kNew;
  if (conversations_[c].saved) {
    ++result_->restore_attempts;
    KV_ASSIGN_OR_RETURN(bool restored, Restore(slot, c));
    if (restored) {
      ++result_->restore_ok;
      kind = TurnKind::kRestored;
    } else {
      ++result_->recompute_turns;
      kind = TurnKind::kRecomputed;
      if (behaviour_.shrink && active_slots_ > 1) --active_slots_;
    }
  } else {
    ++result_->new_conversations;
  }
  SamplePool();
  KV_RETURN_IF_ERROR(Submit(slot, c, kind, start));
  return LimitInFlight();
}

Status ChurnRun::LimitInFlight() {
  if (options_.max_in_flight == 0) return Status::Ok();
  while (true) {
    std::optional<uint32_t> oldest;
    uint32_t num_running = 0;
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].flight == nullptr) continue;
      ++num_running;
      if (!oldest || slots_[s].flight->turn < slots_[*oldest].flight->turn) {
        oldest = s;
      }
    }
    if (num_running < options_.max_in_flight) return Status::Ok();
    KV_RETURN_IF_ERROR(Finish(*oldest));
  }
}

Status ChurnRun::Finish(uint32_t slot) {
  std::shared_ptr<Flight> flight = std::move(slots_[slot].flight);
  if (flight == nullptr) return Status::Ok();
  StatusOr<CompletionResult> done = flight->done.get();
  Conversation& c = conversations_[flight->conversation];
  if (!done.ok()) {
    // E.g. no room for the batch: the conversation keeps its old history
    // and file; the slot's partial KV is dropped.
    ++result_->failed_turns;
    return EraseSlot(slot);
  }
  if (std::optional<Clock::time_point> first = flight->sink->first_token()) {
    const double ttft = MsBetween(flight->start, *first);
    ttft_ms_.push_back(ttft);
    if (flight->kind == TurnKind::kRestored) ttft_restored_ms_.push_back(ttft);
    if (flight->kind == TurnKind::kRecomputed) {
      ttft_recomputed_ms_.push_back(ttft);
    }
  }
  result_->generated_tokens += done->tokens.size();
  c.history = std::move(flight->prompt);
  c.history.insert(c.history.end(), done->tokens.begin(), done->tokens.end());
  StatusOr<SlotSaveResult> saved = engine_->SaveSlot(slot, c.path);
  if (!saved.ok() && saved.status().reason() == "slot_empty") {
    // The engine dropped the idle slot's KV for another slot's room (no
    // spill tier): the conversation goes on from its older file, whose
    // tokens are a prefix of its history, or from a prefill.
    ++result_->lost_saves;
    return EraseSlot(slot);
  }
  if (!saved.ok()) return saved.status().WithContext("churn: save");
  c.saved = true;
  c.saved_tokens = saved->n_saved;
  return Status::Ok();
}

Status ChurnRun::FinishAll() {
  for (uint32_t s = 0; s < slots_.size(); ++s) KV_RETURN_IF_ERROR(Finish(s));
  return Status::Ok();
}

Status ChurnRun::RetireInactiveSlots() {
  for (uint32_t s = active_slots_; s < slots_.size(); ++s) {
    KV_RETURN_IF_ERROR(Finish(s));
    KV_RETURN_IF_ERROR(EraseSlot(s));
  }
  return Status::Ok();
}

Status ChurnRun::EraseSlot(uint32_t slot) {
  SlotState& state = slots_[slot];
  if (state.conversation < 0) return Status::Ok();
  conversations_[state.conversation].in_slot = false;
  state.conversation = -1;
  return engine_->EraseSlot(slot).status().WithContext("churn: erase");
}

uint32_t ChurnRun::PickConversation() {
  std::vector<uint32_t> unheld;
  for (uint32_t i = 0; i < conversations_.size(); ++i) {
    if (!conversations_[i].in_slot) unheld.push_back(i);
  }
  // num_sessions > num_slots, so at least one is free.
  const uint32_t c = unheld[rng_() % unheld.size()];
  Conversation& conv = conversations_[c];
  const uint64_t turn_max = options_.max_user + options_.num_gen + 1;
  if (conv.history.empty() ||
      conv.history.size() + turn_max > options_.ctx_per_slot) {
    // A new conversation (the first, or the old one filled its context).
    conv.history = RandomTokens(min_prompt_, max_prompt_);
    conv.saved = false;
  }
  return c;
}

StatusOr<bool> ChurnRun::Restore(uint32_t slot, uint32_t c) {
  const Conversation& conv = conversations_[c];
  if (behaviour_.explicit_defrag) {
    KV_RETURN_IF_ERROR(DefragIfNoFreeRun(conv.saved_tokens));
  }
  KV_ASSIGN_OR_RETURN(bool ok, TryRestoreOnce(slot, conv));
  if (ok) return true;
  if (behaviour_.wait_on_no_room && AnyInFlight()) {
    // Idle slots can be spilled; running ones cannot: wait for them.
    ++result_->restore_waits;
    KV_RETURN_IF_ERROR(FinishAll());
    return TryRestoreOnce(slot, conv);
  }
  if (behaviour_.explicit_defrag) {
    KV_RETURN_IF_ERROR(RunDefrag());
    return TryRestoreOnce(slot, conv);
  }
  return false;
}

StatusOr<bool> ChurnRun::TryRestoreOnce(uint32_t slot,
                                        const Conversation& c) {
  const Clock::time_point t0 = Clock::now();
  StatusOr<SlotRestoreResult> restored = engine_->RestoreSlot(slot, c.path);
  if (restored.ok()) {
    restore_ms_.push_back(MsBetween(t0, Clock::now()));
    return true;
  }
  if (IsNoRoom(restored.status())) return false;
  return restored.status().WithContext("churn: restore");
}

Status ChurnRun::DefragIfNoFreeRun(uint64_t num_tokens) {
  const uint64_t page = options_.page_size;
  const uint64_t need = (num_tokens + page - 1) / page * page;
  const PoolStats pool = engine_->Metrics().pool;
  if (pool.largest_free_run_cells >= need || pool.free_cells < need) {
    return Status::Ok();  // fits as is, or defragmenting cannot help
  }
  return RunDefrag();
}

Status ChurnRun::RunDefrag() {
  StatusOr<DefragReport> report = engine_->Defrag();
  if (!report.ok()) return report.status().WithContext("churn: defrag");
  ++result_->num_defrags;
  result_->defrag_ms_total += report->elapsed_ms;
  result_->cells_moved += report->cells_moved;
  return Status::Ok();
}

Status ChurnRun::Submit(uint32_t slot, uint32_t c, TurnKind kind,
                        Clock::time_point start) {
  auto flight = std::make_shared<Flight>();
  flight->turn = next_turn_++;
  flight->conversation = c;
  flight->kind = kind;
  flight->start = start;
  flight->prompt = conversations_[c].history;
  const std::vector<TokenId> user =
      RandomTokens(options_.min_user, options_.max_user);
  flight->prompt.insert(flight->prompt.end(), user.begin(), user.end());
  flight->sink = std::make_shared<TurnSink>();
  flight->done = flight->sink->Future();
  CompletionParams params;
  params.prompt = flight->prompt;
  params.n_predict = static_cast<int32_t>(options_.num_gen);
  params.sampling = SamplingParams::Greedy();
  params.slot = slot;
  params.cache_prompt = true;  // reuse the restored KV
  params.ignore_eos = true;
  StatusOr<uint64_t> task = engine_->Submit(std::move(params), flight->sink);
  if (!task.ok()) return task.status().WithContext("churn: submit");
  conversations_[c].in_slot = true;
  slots_[slot].conversation = static_cast<int>(c);
  slots_[slot].flight = std::move(flight);
  return Status::Ok();
}

std::vector<TokenId> ChurnRun::RandomTokens(uint32_t min_len,
                                            uint32_t max_len) {
  const uint64_t span = uint64_t{max_len} - min_len + 1;
  const uint32_t len = min_len + static_cast<uint32_t>(rng_() % span);
  std::vector<TokenId> tokens(len);
  for (TokenId& t : tokens) t = static_cast<TokenId>(rng_() % n_vocab_);
  return tokens;
}

bool ChurnRun::AnyInFlight() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const SlotState& s) { return s.flight != nullptr; });
}

void ChurnRun::SamplePool() {
  const PoolStats pool = engine_->Metrics().pool;
  if (pool.num_cells == 0) return;
  utilization_sum_ += static_cast<double>(pool.used_cells) /
                      static_cast<double>(pool.num_cells);
  ++num_samples_;
}

}  // namespace kvault::bench
