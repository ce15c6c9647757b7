// The turn loop of one churn configuration (bench/scenarios/churn.h) on an
// engine the caller built. Internal to the churn scenario.
#ifndef KVAULT_BENCH_SCENARIOS_CHURN_RUN_H_
#define KVAULT_BENCH_SCENARIOS_CHURN_RUN_H_

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/scenarios/churn.h"
#include "engine/engine.h"

namespace kvault::bench {

// What the harness does for one configuration besides its kv_policy.
struct ChurnBehaviour {
  bool shrink = false;          // one active slot fewer per failed restore
  bool explicit_defrag = false; // Engine::Defrag before a restore with no run
  bool wait_on_no_room = false; // wait for running turns, then retry once
};

class ChurnRun {
 public:
  using Clock = std::chrono::steady_clock;

  // `engine` and `options` must outlive the run; slot files go in `dir`.
  ChurnRun(Engine* engine, const ChurnOptions& options,
           ChurnBehaviour behaviour, std::string dir);

  // Runs options.num_turns turns, waits for the last ones and fills the
  // turn-loop fields of `result` (not config/kv_policy/num_cells, nor the
  // engine counters, which the caller reads from Metrics()).
  Status Run(ChurnResult* result);

 private:
  enum class TurnKind { kNew, kRestored, kRecomputed };
  struct Conversation {
    std::vector<TokenId> history;  // every token of the conversation so far
    std::string path;              // its slot file
    bool saved = false;            // the file holds `saved_tokens` of it
    uint64_t saved_tokens = 0;
    bool in_slot = false;
  };
  struct Flight;  // one turn in progress
  struct SlotState {
    int conversation = -1;  // whose KV the slot holds; -1: none
    std::shared_ptr<Flight> flight;
  };

  Status Turn();
  // Waits for `slot`'s running turn, records it and saves the slot.
  Status Finish(uint32_t slot);
  Status FinishAll();
  // Finishes and erases the slots shrink has taken out of use.
  Status RetireInactiveSlots();
  Status EraseSlot(uint32_t slot);
  uint32_t PickConversation();
  // Restores conversation `c` into `slot`: true on success, false when the
  // engine found no room (after this configuration's remedies).
  StatusOr<bool> Restore(uint32_t slot, uint32_t c);
  StatusOr<bool> TryRestoreOnce(uint32_t slot, const Conversation& c);
  Status DefragIfNoFreeRun(uint64_t num_tokens);
  Status RunDefrag();
  Status Submit(uint32_t slot, uint32_t c, TurnKind kind,
                Clock::time_point start);
  std::vector<TokenId> RandomTokens(uint32_t min_len, uint32_t max_len);
  bool AnyInFlight() const;
  // Finishes the oldest running turns until fewer than max_in_flight run.
  Status LimitInFlight();
  void SamplePool();

  Engine* engine_;
  const ChurnOptions& options_;
  ChurnBehaviour behaviour_;
  std::string dir_;
  std::mt19937_64 rng_;
  uint32_t n_vocab_;
  uint32_t min_prompt_;
  uint32_t max_prompt_;
  std::vector<Conversation> conversations_;
  std::vector<SlotState> slots_;
  uint32_t active_slots_;
  uint64_t cursor_ = 0;        // round-robin position over active slots
  uint64_t next_turn_ = 0;     // numbers the turns (oldest first)
  uint64_t active_sum_ = 0;    // sum of active slots at each turn start
  double utilization_sum_ = 0;
  uint64_t num_samples_ = 0;
  std::vector<double> restore_ms_;
  std::vector<double> ttft_ms_;
  std::vector<double> ttft_restored_ms_;
  std::vector<double> ttft_recomputed_ms_;
  ChurnResult* result_ = nullptr;
};

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_CHURN_RUN_H_
