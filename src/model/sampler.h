// Sampler: picks the next token from a row of logits exactly as
// llama-server (llama.cpp b10573's common_sampler) does, random stream
// included, so a seeded request gives llama-server's tokens.
//
// The chain, built once from SamplingParams like common_sampler_init:
//   logit_bias (when any) ->
//   mirostat 0: params.samplers in order (default penalties, dry,
//               top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature),
//               then dist (or adaptive_p when listed);
//   mirostat 1: temperature, Mirostat 1.0 (m = 100);
//   mirostat 2: temperature, Mirostat 2.0.
// Sample() copies the logits into candidates (id order), runs every stage
// and returns the selected id; samplers whose parameters switch them off
// are not in the chain. The dist draw takes one std::uniform_real_
// distribution<double> value from a std::mt19937 seeded with the 32-bit
// seed at every step, even when one candidate is left or temperature <= 0
// (as b10573 does); XTC, Mirostat and adaptive-p own streams seeded the
// same way. NaN logits are read as -inf (llama.cpp's sorts are undefined
// on NaN).
//
// Accept() must see every prompt token, then every generated token, as
// llama-server replays the prompt into its sampler.
#ifndef KVAULT_MODEL_SAMPLER_H_
#define KVAULT_MODEL_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "model/sampler_grammar.h"
#include "model/sampler_vocab.h"
#include "model/sampling_candidates.h"
#include "model/sampling_params.h"

namespace kvault {

namespace sampling {
class Stage;
}  // namespace sampling

// What the sampler needs from the model beyond the parameters.
struct SamplerContext {
  // Token texts for DRY's sequence breakers and the infill sampler (not
  // owned; must outlive the Sampler). Null: DRY runs without breakers; a
  // chain with the infill sampler then fails its KV_CHECK.
  const SamplerVocab* vocab = nullptr;
  // The model's training context (llama_model_n_ctx_train): how far back
  // DRY looks at most, and what its dry_penalty_last_n -1 means. 0: no cap.
  int32_t n_ctx_train = 0;
  // The slot's context size: replaces -1 in repeat_last_n and
  // dry_penalty_last_n that the caller left unresolved. 0: -1 switches the
  // repetition penalties off (as llama.cpp's clamp to 0 does).
  int32_t n_ctx_slot = 0;
  // The vocabulary's pieces as a trie (BuildGrammarTrie(*vocab)), for
  // requests with a grammar; null: a grammar request fails its KV_CHECK.
  const TokenTrie* grammar_trie = nullptr;
};

// One entry of TopLogprobs.
struct TokenLogprob {
  TokenId id = 0;
  float logprob = 0;
};

// Returns the `n` most likely tokens of `logits` with their log-softmax,
// most likely first (ties: lowest id first); fewer when n > logits.size().
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, size_t n);

// Returns token `id`'s log-softmax in `logits` (-inf when every logit is).
// Precondition: id < logits.size().
float LogprobOf(std::span<const float> logits, TokenId id);

// Returns the index of the largest logit, the lowest on ties (NaN ignored;
// 0 when every logit is NaN or -inf). Precondition: !logits.empty().
TokenId ArgMax(std::span<const float> logits);

// A token with its probability as llama-server reports it.
struct TokenProb {
  TokenId id = 0;
  float prob = 0;
  friend bool operator==(const TokenProb&, const TokenProb&) = default;
};

// What llama-server's n_probs reports for one generated token: `top` (its
// completion_probabilities[].top_probs / top_logprobs, most likely first)
// and `chosen` (the generated token's prob). llama-server's logprob is
// std::log(prob) in float.
struct TokenProbs {
  std::vector<TokenProb> top;
  float chosen = 1.0f;  // llama-server's value when the token is not found
};

// The probabilities before sampling (llama-server's default,
// post_sampling_probs false): the float softmax of the raw logits (summed in
// the order a partial sort of the n best leaves them), the n best first.
TokenProbs PreSamplingProbs(std::span<const float> logits, size_t n,
                            TokenId chosen);

class Sampler {
 public:
  // `params` must be valid (see Validate); a random seed is drawn from
  // std::random_device.
  explicit Sampler(const SamplingParams& params);
  Sampler(const SamplingParams& params, const SamplerContext& context);
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // Returns the next token for `logits` (one per vocabulary entry). Does
  // not record it: call Accept. Precondition: !logits.empty(). With a
  // grammar: a token it allows; when it allows none, the end-of-generation
  // token, and grammar_error() says why (the caller fails the request).
  TokenId Sample(std::span<const float> logits);
  // Returns OK, or why the last Sample() found no token the grammar allows
  // (grammar_limit_exceeded or grammar_dead_end).
  const Status& grammar_error() const { return grammar_error_; }
  // Records `token` in the samplers' histories (penalties, DRY, adaptive-p):
  // the prompt's tokens.
  void Accept(TokenId token);
  // Accept for a generated token, which also advances the grammar.
  void AcceptGenerated(TokenId token);
  // Forgets the histories, restores Mirostat's mu and reseeds every random
  // stream with the seed in use.
  void Reset();

  // The probabilities after the chain (post_sampling_probs true) for the
  // last Sample(): the candidates left, by descending probability, at most
  // `n` and none of probability 0; `chosen` is the sampled token's.
  TokenProbs PostSamplingProbs(size_t n) const;

  // Returns the parameters.
  const SamplingParams& params() const { return params_; }
  // Returns the seed in use (the drawn one when params().seed was random).
  uint64_t seed() const { return seed_; }

 private:
  void BuildChain(const SamplerContext& context);
  // Appends params_.samplers' stages and the final draw.
  void AddFilters(const SamplerContext& context);
  // Returns the stage of `type` (not DRY or adaptive-p); null when its
  // parameters switch it off.
  std::unique_ptr<sampling::Stage> MakeFilter(
      SamplerType type, const SamplerContext& context) const;

  // Runs the chain over `logits`; returns the selected id.
  TokenId RunChain(std::span<const float> logits);

  SamplingParams params_;
  uint32_t seed_;
  std::unique_ptr<SamplerGrammar> grammar_;  // null without a grammar
  std::optional<TokenId> end_token_;  // when the grammar allows none; after
                                      // a scripted reply
  size_t scripted_at_ = 0;            // next of params_.scripted_tokens
  Status grammar_error_;              // see grammar_error()
  std::vector<float> masked_;                // grammar-masked logits, reused
  std::vector<std::unique_ptr<sampling::Stage>> stages_;
  std::vector<sampling::Candidate> candidates_;  // [n_vocab], reused
  sampling::CandidateView view_;                 // the last Sample()'s
};

}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLER_H_
