// Sampler: picks the next token from a row of logits with llama.cpp's
// default sampler chain (llama-server's order and defaults):
//
//   repeat penalty -> top-k -> top-p -> min-p -> temperature -> draw
//
//  * temperature <= 0 is greedy: the argmax, ties broken towards the lowest
//    id (no filter or draw runs, and the PRNG is not advanced).
//  * top_k <= 0, top_p >= 1 and min_p <= 0 disable their filter; every
//    filter keeps at least one token.
//  * top-p keeps the most likely tokens until their probability mass (a
//    softmax over the candidates top-k left, before temperature) reaches
//    top_p, including the token that crosses it.
//  * min-p keeps tokens whose probability is >= min_p times the most likely
//    one's (compared on logits: logit >= max_logit + log(min_p)).
//  * Candidates are ordered by logit, then by id, so the result depends only
//    on the logits, the parameters, the seed and the accepted history; the
//    draw uses std::mt19937_64 (its output is fixed by the standard) with a
//    uniform built here, not std::uniform_real_distribution (whose output
//    differs between standard libraries).
//  * NaN logits are treated as -inf.
#ifndef KVAULT_MODEL_SAMPLER_H_
#define KVAULT_MODEL_SAMPLER_H_

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_types.h"

namespace kvault {

// llama.cpp's LLAMA_DEFAULT_SEED: "pick a random seed".
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // in [0, 1]; 1: off
  float min_p = 0.05f;       // in [0, 1]; 0: off
  uint64_t seed = kRandomSeed;
  float repeat_penalty = 1.0f;  // 1: off; llama.cpp's penalty_repeat
  int32_t repeat_last_n = 64;   // how many accepted tokens it looks back

  // Returns greedy parameters (temperature 0).
  static SamplingParams Greedy();
  // InvalidArgument (reason "out_of_range") naming the field for a value
  // outside its domain: temperature finite, top_p and min_p in [0, 1],
  // repeat_penalty finite and > 0, repeat_last_n >= 0.
  Status Validate() const;
};

// One entry of TopLogprobs.
struct TokenLogprob {
  TokenId id = 0;
  float logprob = 0;
};

// Returns the `n` most likely tokens of `logits` with their log-softmax,
// most likely first (ties: lowest id first); fewer when n > logits.size().
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, size_t n);

// Returns the index of the largest logit, the lowest on ties (NaN ignored;
// 0 when every logit is NaN or -inf). Precondition: !logits.empty().
TokenId ArgMax(std::span<const float> logits);

class Sampler {
 public:
  // `params` must be valid (see Validate); kRandomSeed draws a seed from
  // std::random_device.
  explicit Sampler(const SamplingParams& params);

  // Returns the next token for `logits` (one per vocabulary entry). Does
  // not record it: call Accept. Precondition: !logits.empty().
  TokenId Sample(std::span<const float> logits);
  // Records `token` in the repeat-penalty history (prompt and generated
  // tokens alike, as llama-server does).
  void Accept(TokenId token);
  // Forgets the history and reseeds the PRNG with the seed in use.
  void Reset();

  // Returns the parameters.
  const SamplingParams& params() const { return params_; }
  // Returns the seed in use (the drawn one when params().seed was random).
  uint64_t seed() const { return seed_; }

 private:
  struct Candidate {
    TokenId id;
    float logit;
  };

  // Fills candidates_ from `logits`, applying the repeat penalty.
  void Gather(std::span<const float> logits);
  void ApplyTopK();
  void ApplyTopP();
  void ApplyMinP();
  // Draws from the softmax of candidates_' logits / temperature.
  TokenId Draw();
  // Returns a uniform double in [0, 1) with 53 random bits.
  double NextUniform();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<TokenId> history_;   // the last repeat_last_n accepted tokens
  std::vector<Candidate> candidates_;  // reused between calls
  bool sorted_ = false;  // candidates_ sorted by (logit desc, id asc)
};

}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLER_H_
