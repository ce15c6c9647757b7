// SamplingParams: every knob of llama.cpp's sampler chain that llama-server
// requests and flags reach, with llama-server's defaults (b10573), plus the
// sampler names of its `samplers` field.
//
// Field names follow kvault (the HTTP field is given where it differs), and
// each field keeps llama.cpp's meaning, including its "off" values:
//   top_k <= 0, top_p >= 1, min_p <= 0, typical_p >= 1, top_n_sigma <= 0,
//   xtc_probability <= 0 or xtc_threshold > 0.5, dynatemp_range <= 0,
//   temperature == 1 (and no dynatemp), repeat_penalty == 1 with the two
//   other penalties 0 (or repeat_last_n == 0), dry_multiplier == 0 or
//   dry_base < 1 or dry_penalty_last_n == 0, adaptive_target < 0.
// temperature <= 0 still runs the whole chain: the temperature step keeps
// only the most likely candidate, and the final draw consumes the random
// stream as at any other temperature (so later draws line up with
// llama-server's).
#ifndef KVAULT_MODEL_SAMPLING_PARAMS_H_
#define KVAULT_MODEL_SAMPLING_PARAMS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "kv/kv_types.h"

namespace kvault {

// llama.cpp's LLAMA_DEFAULT_SEED: "pick a random seed".
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFu;

// The samplers a chain can hold, as llama.cpp's common_sampler_type.
enum class SamplerType : uint8_t {
  kDry,
  kTopK,
  kTopP,
  kTopNSigma,
  kTypicalP,
  kMinP,
  kTemperature,
  kXtc,
  kInfill,
  kPenalties,
  kAdaptiveP,
};

// Returns llama.cpp's canonical name of `type` ("top_k", "typ_p", ...), the
// one llama-server's `samplers` array and /props use.
std::string_view SamplerTypeName(SamplerType type);
// Returns llama.cpp's one-letter code of `type` ('k', 'y', ...), the one
// llama-server's `samplers` string uses.
char SamplerTypeChar(SamplerType type);
// Returns the types named by `names` in order. Canonical names only unless
// `allow_alt_names` ("top-k", "nucleus", "temp", ... as llama.cpp's command
// line accepts); like llama.cpp, unknown names are skipped, and appended to
// `unknown` when it is not null.
std::vector<SamplerType> SamplerTypesFromNames(
    std::span<const std::string> names, bool allow_alt_names = false,
    std::vector<std::string>* unknown = nullptr);
// Returns the types of the letters of `chars` in order; unknown letters are
// skipped (appended to `unknown` when it is not null).
std::vector<SamplerType> SamplerTypesFromChars(std::string_view chars,
                                               std::string* unknown = nullptr);
// Returns llama-server's default order: penalties, dry, top_n_sigma, top_k,
// typ_p, top_p, min_p, xtc, temperature.
std::vector<SamplerType> DefaultSamplerOrder();

// One logit_bias entry: `bias` is added to the token's logit (-inf bans it).
struct LogitBias {
  TokenId token = 0;
  float bias = 0;
  friend bool operator==(const LogitBias&, const LogitBias&) = default;
};

struct SamplingParams {
  // Only the low 32 bits are used (llama.cpp seeds are uint32_t); the value
  // kRandomSeed (or any value whose low 32 bits are all ones) is random.
  uint64_t seed = kRandomSeed;
  float temperature = 0.8f;        // <= 0: keep the most likely token only
  float dynatemp_range = 0.0f;     // > 0: temperature +- range by entropy
  float dynatemp_exponent = 1.0f;  // the entropy -> temperature curve
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float typical_p = 1.0f;
  float top_n_sigma = -1.0f;
  float xtc_probability = 0.0f;
  float xtc_threshold = 0.1f;
  // Penalties over the last repeat_last_n accepted tokens (prompt included);
  // -1 means the slot's context size (ResolveContextSize).
  int32_t repeat_last_n = 64;
  float repeat_penalty = 1.0f;     // llama.cpp's penalty_repeat
  float presence_penalty = 0.0f;   // penalty_present
  float frequency_penalty = 0.0f;  // penalty_freq
  // DRY ("don't repeat yourself"); dry_penalty_last_n -1 is the context size.
  float dry_multiplier = 0.0f;
  float dry_base = 1.75f;
  int32_t dry_allowed_length = 2;
  int32_t dry_penalty_last_n = 64;
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
  int32_t mirostat = 0;  // 0 off, 1 Mirostat, 2 Mirostat 2.0
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
  float adaptive_target = -1.0f;  // the adaptive_p sampler, when listed
  float adaptive_decay = 0.9f;
  int32_t min_keep = 0;  // the least tokens each filter keeps (0: 1)
  // Applied first, in order; entries for ids outside the vocabulary are
  // ignored. ignore_eos is EogLogitBias (sampler_vocab.h) appended here.
  std::vector<LogitBias> logit_bias;
  std::vector<SamplerType> samplers = DefaultSamplerOrder();
  // Constrains the output to this grammar's language (request "grammar",
  // or a JSON schema turned into one); null: unconstrained. grammar_text is
  // its GBNF source, as generation_settings shows it.
  std::shared_ptr<const Grammar> grammar;
  std::string grammar_text;
  // Test hook (the server's KVAULT_TEST_HOOKS): generation emits these
  // tokens in order, then end of generation, whatever the logits say, so
  // an end-to-end test can script a model's reply. Empty: normal sampling.
  std::vector<TokenId> scripted_tokens;

  // Returns the default parameters with temperature 0.
  static SamplingParams Greedy();
  // Returns the seed the random samplers use (the low 32 bits of seed).
  uint32_t seed32() const { return static_cast<uint32_t>(seed); }
  // Replaces -1 in repeat_last_n and dry_penalty_last_n by `n_ctx_slot`, as
  // llama-server does when it reads a request.
  void ResolveContextSize(int32_t n_ctx_slot);
  // Applies llama-server b10573's soft limits to request values, as it does
  // before sampling: top_k < 0 -> 0; top_p, min_p, xtc_probability,
  // xtc_threshold clamped to [0, 1]; temperature < 0 -> 0; mirostat clamped
  // to [0, 2]; adaptive_target > 1 -> 1; dry_base < 1 -> default_dry_base
  // (the server's default). Its hard limits are Validate's errors.
  void ClampToServerLimits(float default_dry_base = 1.75f);
  // InvalidArgument (reason "out_of_range") naming the field, its value and
  // its domain for a value outside it: temperature, dynatemp_range,
  // dynatemp_exponent, typical_p, top_n_sigma, presence_penalty,
  // frequency_penalty, dry_multiplier, dry_base, mirostat_tau,
  // mirostat_eta, adaptive_target finite; repeat_penalty finite and > 0;
  // top_p, min_p, xtc_probability, xtc_threshold in [0, 1] (llama-server
  // clamps these instead: ClampToServerLimits first to accept what it
  // accepts); adaptive_decay in [0, 0.99]; repeat_last_n and
  // dry_penalty_last_n >= -1; dry_allowed_length, min_keep >= 0; mirostat
  // in {0, 1, 2}; logit_bias tokens >= 0 with a bias that is not NaN.
  Status Validate() const;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLING_PARAMS_H_
