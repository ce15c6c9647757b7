// The samplers of llama.cpp's chain, one Stage each. A Sampler (sampler.h)
// builds them in llama-server's order and runs them over a CandidateView.
//
// Each Make* function returns nullptr where llama.cpp would build an
// "empty" sampler (its parameters switch it off), so the chain holds only
// stages that act. The random stages (dist, XTC, Mirostat, adaptive-p) each
// own a std::mt19937 seeded with the same 32-bit seed, as llama.cpp's do,
// and draw with libstdc++'s standard distributions, as llama.cpp's do.
#ifndef KVAULT_MODEL_SAMPLING_STAGES_H_
#define KVAULT_MODEL_SAMPLING_STAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "model/sampling_candidates.h"
#include "model/sampling_params.h"

namespace kvault {

class SamplerVocab;

namespace sampling {

class Stage {
 public:
  virtual ~Stage() = default;
  // Filters, rescales or draws from `view` (a draw sets view->selected).
  virtual void Apply(CandidateView* view) = 0;
  // Records an accepted token (prompt tokens included).
  virtual void Accept(TokenId token) {}
  // Forgets the history and reseeds the random stream.
  virtual void Reset() {}
};

// Filters and transforms (sampling_filters.cc).
std::unique_ptr<Stage> MakeLogitBias(std::vector<LogitBias> biases);
std::unique_ptr<Stage> MakeTopK(int32_t k);
std::unique_ptr<Stage> MakeTopP(float p, size_t min_keep);
std::unique_ptr<Stage> MakeMinP(float p, size_t min_keep);
std::unique_ptr<Stage> MakeTypical(float p, size_t min_keep);
std::unique_ptr<Stage> MakeTopNSigma(float n);
// The plain temperature (Mirostat chains).
std::unique_ptr<Stage> MakeTemperature(float temp);
// Temperature with dynamic range `delta` and `exponent` (the default chain).
std::unique_ptr<Stage> MakeTemperatureExt(float temp, float delta,
                                          float exponent);

// Stages with a random stream (sampling_random.cc).
std::unique_ptr<Stage> MakeDist(uint32_t seed);
std::unique_ptr<Stage> MakeXtc(float probability, float threshold,
                               size_t min_keep, uint32_t seed);
// Mirostat 1.0; `m` is the number of top tokens its estimate reads.
std::unique_ptr<Stage> MakeMirostat(int32_t n_vocab, uint32_t seed, float tau,
                                    float eta, int32_t m);
std::unique_ptr<Stage> MakeMirostatV2(uint32_t seed, float tau, float eta);
// Never null: the adaptive-p stage also draws the token.
std::unique_ptr<Stage> MakeAdaptiveP(float target, float decay, uint32_t seed);

// Stages with a token history (sampling_penalties.cc).
std::unique_ptr<Stage> MakePenalties(int32_t last_n, float repeat, float freq,
                                     float present);

struct DryConfig {
  float multiplier = 0;
  float base = 0;
  int32_t allowed_length = 0;
  int32_t penalty_last_n = 0;  // -1: n_ctx_train
  int32_t n_ctx_train = 0;     // caps how far back repeats are looked for
  std::vector<std::string> breakers;
};
// `vocab` (may be null: no sequence breakers) turns the breaker strings
// into token sequences; it is only read here.
std::unique_ptr<Stage> MakeDry(const DryConfig& config,
                               const SamplerVocab* vocab);

// The infill stage (sampling_infill.cc); `vocab` must outlive the stage.
std::unique_ptr<Stage> MakeInfill(const SamplerVocab* vocab);

}  // namespace sampling
}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLING_STAGES_H_
