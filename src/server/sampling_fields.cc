#include "server/sampling_fields.h"

#include <cmath>
#include <limits>
#include <string>

#include "server/grammar_fields.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Status ReadInt32(const json& body, std::string_view key, int64_t lo,
                 int32_t* out) {
  int64_t v = *out;
  KV_RETURN_IF_ERROR(ReadInt(body, key, lo, kInt32Max, &v));
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

Status ReadFloats(const json& body, SamplingParams* s) {
  const std::pair<const char*, float*> fields[] = {
      {"temperature", &s->temperature},
      {"dynatemp_range", &s->dynatemp_range},
      {"dynatemp_exponent", &s->dynatemp_exponent},
      {"top_p", &s->top_p},
      {"min_p", &s->min_p},
      {"typical_p", &s->typical_p},
      {"top_n_sigma", &s->top_n_sigma},
      {"xtc_probability", &s->xtc_probability},
      {"xtc_threshold", &s->xtc_threshold},
      {"repeat_penalty", &s->repeat_penalty},
      {"presence_penalty", &s->presence_penalty},
      {"frequency_penalty", &s->frequency_penalty},
      {"dry_multiplier", &s->dry_multiplier},
      {"dry_base", &s->dry_base},
      {"mirostat_tau", &s->mirostat_tau},
      {"mirostat_eta", &s->mirostat_eta},
      {"adaptive_target", &s->adaptive_target},
      {"adaptive_decay", &s->adaptive_decay}};
  for (const auto& [key, out] : fields) {
    KV_RETURN_IF_ERROR(ReadFloat(body, key, out));
  }
  return Status::Ok();
}

Status ReadInts(const json& body, SamplingParams* s) {
  KV_RETURN_IF_ERROR(ReadInt32(body, "top_k", -kInt32Max, &s->top_k));
  KV_RETURN_IF_ERROR(ReadInt32(body, "repeat_last_n", -1, &s->repeat_last_n));
  KV_RETURN_IF_ERROR(
      ReadInt32(body, "dry_allowed_length", -kInt32Max, &s->dry_allowed_length));
  KV_RETURN_IF_ERROR(
      ReadInt32(body, "dry_penalty_last_n", -1, &s->dry_penalty_last_n));
  KV_RETURN_IF_ERROR(ReadInt32(body, "mirostat", -kInt32Max, &s->mirostat));
  KV_RETURN_IF_ERROR(ReadInt32(body, "min_keep", -kInt32Max, &s->min_keep));
  int64_t seed = s->seed == kRandomSeed ? -1 : static_cast<int64_t>(s->seed);
  KV_RETURN_IF_ERROR(
      ReadInt(body, "seed", -1, std::numeric_limits<int64_t>::max(), &seed));
  s->seed = seed < 0 ? kRandomSeed : static_cast<uint64_t>(seed);
  return Status::Ok();
}

// dry_sequence_breakers: a non-empty array of strings.
Status ReadBreakers(const json& body, SamplingParams* s) {
  const json* v = FindField(body, "dry_sequence_breakers");
  if (v == nullptr) return Status::Ok();
  if (!v->is_array() || v->empty()) {
    return WrongType("dry_sequence_breakers", "a non-empty array of strings",
                     *v);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return WrongType("dry_sequence_breakers[" + std::to_string(i) + "]",
                       "a string", (*v)[i]);
    }
    out.push_back((*v)[i].get<std::string>());
  }
  s->dry_sequence_breakers = std::move(out);
  return Status::Ok();
}

// samplers: an array of names or a string of letters (llama's two forms).
Status ReadSamplers(const json& body, SamplingParams* s) {
  const json* v = FindField(body, "samplers");
  if (v == nullptr) return Status::Ok();
  if (v->is_string()) {
    s->samplers = SamplerTypesFromChars(v->get<std::string>());
    return Status::Ok();
  }
  if (!v->is_array()) {
    return WrongType("samplers", "an array of names or a string", *v);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return WrongType("samplers[" + std::to_string(i) + "]", "a string",
                       (*v)[i]);
    }
    names.push_back((*v)[i].get<std::string>());
  }
  s->samplers = SamplerTypesFromNames(names, /*allow_alt_names=*/true);
  return Status::Ok();
}

// One logit_bias entry: `key` a token id or text, `bias` a number or false.
Status AddBias(const json& key, const json& bias, const std::string& field,
               const Tokenizer* tokenizer, SamplingParams* s) {
  float value = 0;
  if (bias.is_boolean() && !bias.get<bool>()) {
    value = kNegInf;
  } else if (bias.is_number()) {
    value = bias.get<float>();
  } else {
    return WrongType(field + ".bias", "a number or false", bias);
  }
  if (key.is_number_integer()) {
    // As llama-server, ids outside the vocabulary are dropped.
    const int64_t id = key.get<int64_t>();
    const bool known = tokenizer == nullptr ||
                       id < static_cast<int64_t>(tokenizer->vocab().size());
    if (id >= 0 && known) s->logit_bias.push_back({TokenId(id), value});
    return Status::Ok();
  }
  if (!key.is_string() || tokenizer == nullptr) {
    return WrongType(field, "a token id or a text", key);
  }
  for (TokenId id : tokenizer->Tokenize(key.get<std::string>(), false, false)) {
    s->logit_bias.push_back({id, value});
  }
  return Status::Ok();
}

Status ReadLogitBias(const json& body, const Tokenizer* tokenizer,
                     SamplingParams* s) {
  const json* v = FindField(body, "logit_bias");
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (v->is_object()) {  // OpenAI's form: {"token id or text": bias}
    for (const auto& [key, bias] : v->items()) {
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      const json k = (!key.empty() && *end == '\0') ? json(id) : json(key);
      KV_RETURN_IF_ERROR(
          AddBias(k, bias, "logit_bias." + key, tokenizer, s));
    }
    return Status::Ok();
  }
  if (!v->is_array()) return WrongType("logit_bias", "an array or object", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const std::string field = "logit_bias[" + std::to_string(i) + "]";
    if (!e.is_array() || e.size() != 2) {
      return WrongType(field, "a [token, bias] pair", e);
    }
    KV_RETURN_IF_ERROR(AddBias(e[0], e[1], field, tokenizer, s));
  }
  return Status::Ok();
}

}  // namespace

Status ReadSamplingFields(const json& body, const Tokenizer* tokenizer,
                          SamplingParams* s,
                          const nlohmann::ordered_json* ordered,
                          const GrammarCompileFn* compile) {
  KV_RETURN_IF_ERROR(ReadFloats(body, s));
  KV_RETURN_IF_ERROR(ReadInts(body, s));
  KV_RETURN_IF_ERROR(ReadBreakers(body, s));
  KV_RETURN_IF_ERROR(ReadSamplers(body, s));
  KV_RETURN_IF_ERROR(ReadLogitBias(body, tokenizer, s));
  KV_RETURN_IF_ERROR(ReadGrammarFields(body, s, ordered, compile));
  // Out-of-range values are errors naming the field (llama-server clamps
  // some of them silently; kvault says so instead).
  return s->Validate();
}

json SamplingSettingsJson(const SamplingParams& s) {
  json samplers = json::array();
  for (SamplerType t : s.samplers) samplers.push_back(SamplerTypeName(t));
  json bias = json::array();
  for (const LogitBias& b : s.logit_bias) {
    bias.push_back({{"bias", std::isinf(b.bias) ? json(nullptr) : json(b.bias)},
                    {"token", b.token}});
  }
  return json{{"seed", s.seed},
              {"temperature", s.temperature},
              {"dynatemp_range", s.dynatemp_range},
              {"dynatemp_exponent", s.dynatemp_exponent},
              {"top_k", s.top_k},
              {"top_p", s.top_p},
              {"min_p", s.min_p},
              {"top_n_sigma", s.top_n_sigma},
              {"xtc_probability", s.xtc_probability},
              {"xtc_threshold", s.xtc_threshold},
              {"typical_p", s.typical_p},
              {"repeat_last_n", s.repeat_last_n},
              {"repeat_penalty", s.repeat_penalty},
              {"presence_penalty", s.presence_penalty},
              {"frequency_penalty", s.frequency_penalty},
              {"dry_multiplier", s.dry_multiplier},
              {"dry_base", s.dry_base},
              {"dry_allowed_length", s.dry_allowed_length},
              {"dry_penalty_last_n", s.dry_penalty_last_n},
              {"dry_sequence_breakers", s.dry_sequence_breakers},
              {"mirostat", s.mirostat},
              {"mirostat_tau", s.mirostat_tau},
              {"mirostat_eta", s.mirostat_eta},
              {"adaptive_target", s.adaptive_target},
              {"adaptive_decay", s.adaptive_decay},
              {"min_keep", s.min_keep},
              {"logit_bias", std::move(bias)},
              {"grammar", s.grammar_text},
              {"samplers", std::move(samplers)}};
}

}  // namespace kvault
