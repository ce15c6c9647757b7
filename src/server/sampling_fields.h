// llama-server's sampling request fields (POST /completion and the OpenAI
// routes' llama extensions): each one read into SamplingParams with its
// type checked, clamped and validated as llama-server b10573 does, and the
// settings written back as its generation_settings object.
#ifndef KVAULT_SERVER_SAMPLING_FIELDS_H_
#define KVAULT_SERVER_SAMPLING_FIELDS_H_

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "server/grammar_fields.h"

namespace kvault {

// Reads every sampler field of `body` present into `s` (absent fields keep
// s's values, the server's defaults): temperature, dynatemp_range,
// dynatemp_exponent, top_k, top_p, min_p, typical_p, top_n_sigma,
// xtc_probability, xtc_threshold, repeat_penalty, repeat_last_n,
// presence_penalty, frequency_penalty, dry_*, mirostat*, adaptive_*,
// min_keep, seed, samplers (names or a letter string), logit_bias (an array
// of [token id or text, bias or false] or an object of them; text is
// tokenized and every token gets the bias). Then Validate: a value
// outside its domain is an error, not clamped. InvalidArgument names the field.
// `tokenizer` may be null (then logit_bias takes token ids only). Also
// grammar, json_schema and response_format (grammar_fields.h; `ordered`,
// which may be null, keeps a schema's property order; `compile`, which may
// be null, compiles the grammar).
Status ReadSamplingFields(const nlohmann::json& body,
                          const Tokenizer* tokenizer, SamplingParams* s,
                          const nlohmann::ordered_json* ordered = nullptr,
                          const GrammarCompileFn* compile = nullptr);

// Returns the sampler part of llama-server's generation_settings: every
// field above, samplers by name, logit_bias as [{bias, token}] (bias null
// for -inf).
nlohmann::json SamplingSettingsJson(const SamplingParams& s);

}  // namespace kvault

#endif  // KVAULT_SERVER_SAMPLING_FIELDS_H_
