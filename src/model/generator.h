// Generator: single-sequence text generation on top of a forward pass. The
// prompt is prefilled in batches of up to `prefill_chunk` tokens (logits
// only for its last token), then one token is sampled and decoded at a time
// until an end-of-generation token, max_new_tokens, the context limit, or
// the callback says stop.
//
// The last sampled token is not decoded (nothing needs its logits); it is
// kept pending and fed first by the next Generate call, so a conversation
// can continue in the same sequence without recomputing anything.
#ifndef KVAULT_MODEL_GENERATOR_H_
#define KVAULT_MODEL_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_types.h"
#include "model/inference.h"
#include "model/sampler.h"
#include "model/vocab.h"

namespace kvault {

struct GeneratorOptions {
  uint32_t max_new_tokens = 128;
  uint32_t prefill_chunk = 512;  // prompt tokens per forward call (>= 1)
  uint32_t n_ctx = 0;            // stop before position n_ctx; 0: no limit
  bool stop_at_eog = true;       // stop at the vocabulary's EOS / EOT
};

struct GenerationTimings {
  uint64_t num_prompt_tokens = 0;  // tokens prefilled (pending one included)
  double prompt_ms = 0;            // wall time of the prefill forward calls
  uint64_t num_generated = 0;      // tokens sampled (EOG excluded)
  uint64_t num_decode_steps = 0;   // single-token forward calls
  double gen_ms = 0;  // from the prompt's logits to the last token sampled

  // Returns prefill throughput in tokens/s (0 when nothing was timed).
  double prompt_tok_per_s() const;
  // Returns decode throughput: decode steps per second (0 when none).
  double gen_tok_per_s() const;
};

enum class StopReason { kEndOfGeneration, kMaxTokens, kContextFull, kCallback };

// Returns "eog", "length", "context" or "callback".
const char* StopReasonName(StopReason reason);

struct GenerationResult {
  std::vector<TokenId> tokens;  // generated tokens, EOG excluded
  StopReason stop = StopReason::kMaxTokens;
  GenerationTimings timings;
};

// Called with each generated token (not EOG); returning false stops after
// it.
using TokenCallback = std::function<bool(TokenId)>;

class Generator {
 public:
  // Plays InferenceContext::Decode: the logits of the wanted tokens.
  using DecodeFn =
      std::function<StatusOr<std::vector<float>>(std::span<const BatchToken>)>;

  // Generates into `seq` of `context`'s cache (not owned; outlives this);
  // `seq` must hold no cells yet.
  Generator(InferenceContext* context, SeqId seq);
  // Generates through `decode` (e.g. a fake in tests); `vocab` (outlives
  // this) says which tokens end generation.
  Generator(DecodeFn decode, const Vocab* vocab, SeqId seq);

  // Prefills `prompt` after the tokens already in the sequence, then
  // samples up to options.max_new_tokens tokens with `sampler`, calling
  // `on_token` (may be empty) for each. Every prompt token is passed to
  // sampler->Accept. InvalidArgument for an empty prompt with nothing
  // pending, bad options, or a prompt that does not fit n_ctx; forward-pass
  // errors are returned as they come (with the position).
  StatusOr<GenerationResult> Generate(std::span<const TokenId> prompt,
                                      Sampler* sampler,
                                      const GeneratorOptions& options,
                                      const TokenCallback& on_token = {});

  // Returns the position the next token fed will take.
  Pos next_pos() const { return next_pos_; }
  // Returns the sampled token not yet fed to the model, if any.
  std::optional<TokenId> pending() const { return pending_; }

 private:
  // Feeds `tokens` in chunks; returns the last token's logits.
  StatusOr<std::vector<float>> Prefill(std::span<const TokenId> tokens,
                                       uint32_t chunk);
  // Feeds one token; returns its logits.
  StatusOr<std::vector<float>> DecodeOne(TokenId token);

  DecodeFn decode_;
  const Vocab* vocab_;
  SeqId seq_;
  Pos next_pos_ = 0;
  std::optional<TokenId> pending_;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_GENERATOR_H_
