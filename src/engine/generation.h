// Generation: what a running request does with its logits — sampling the
// next token, stop conditions (end of generation, n_predict, stop strings,
// the slot's context, with context shift), streaming to the sink — and how
// it ends (result or error), on the scheduler thread.
#ifndef KVAULT_ENGINE_GENERATION_H_
#define KVAULT_ENGINE_GENERATION_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/scheduler_ports.h"
#include "engine/scheduler_state.h"
#include "engine/work.h"
#include "model/sampler_grammar.h"
#include "model/sampler_vocab.h"
#include "model/tokenizer.h"

namespace kvault {

struct GenerationOptions {
  uint32_t ctx_per_slot = 0;
  bool context_shift = false;
  // The model's: for the samplers, and the end of generation without a
  // budget.
  uint32_t n_ctx_train = 0;
};

class Generation {
 public:
  // None owned; all must outlive this.
  Generation(const GenerationOptions& options, SchedulerState* state,
             SlotKv* kv, ForwardPass* forward, const Tokenizer* tokenizer,
             const SamplerVocab* vocab);

  // Builds the request `work` asks for (sampler, detokenizer, stops).
  std::unique_ptr<Request> NewRequest(CompletionWork work);
  // Samples the slot's next token from `row` and streams it; ends the
  // request on a stop condition or when the sink cancels.
  void HandleLogits(Slot& slot, std::span<const float> row);
  // Ends the slot's request with a result / an error; the slot keeps its
  // KV and comes to rest.
  void Finish(Slot& slot, const std::string& stop_type, bool truncated);
  void Fail(Slot& slot, const Status& status);
  // Tells the request's sink how far its prompt evaluation has come, when
  // it asked (return_progress).
  void ReportPromptProgress(const Slot& slot) const;

 private:
  // With context shift on, discards part of the slot's context (after its
  // kept start) so generation can go on; false when it may not or cannot.
  bool ShiftContext(Slot& slot);
  // Returns the text the stop matcher and detokenizer still hold.
  static std::string FlushText(Request& request);
  // Returns the request's timings so far.
  static CompletionTimings LiveTimings(const Request& request);
  // Detaches the finished request; the slot rests, LRU-touched.
  void Release(Slot& slot);

  GenerationOptions options_;
  SchedulerState* state_;
  SlotKv* kv_;
  ForwardPass* forward_;
  const Tokenizer* tokenizer_;
  const SamplerVocab* vocab_;
  // The vocabulary's pieces as a trie, built for the first request with a
  // grammar.
  std::unique_ptr<TokenTrie> grammar_trie_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_GENERATION_H_
