#include "server/completion_codec.h"

#include <limits>

#include "model/unicode_text.h"
#include "model/sampler_vocab.h"
#include "server/http_error.h"
#include "server/json_fields.h"
#include "server/unsupported_fields.h"
#include "server/sampling_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

// Returns the id at `p` after checking it is an integer in [0, n_vocab).
StatusOr<TokenId> ReadTokenId(const json& p, const Tokenizer& tokenizer,
                              const std::string& field) {
  if (!p.is_number_integer()) {  // unsigned counts as integer too
    return WrongType(field, "a token id (integer)", p);
  }
  const int64_t n_vocab = static_cast<int64_t>(tokenizer.num_tokens());
  if (p.is_number_unsigned()
          ? p.get<uint64_t>() >= uint64_t(n_vocab)
          : (p.get<int64_t>() < 0 || p.get<int64_t>() >= n_vocab)) {
    return InvalidArgumentError("field '" + field + "': token id " + p.dump() +
                                " is outside the vocabulary [0, " +
                                std::to_string(n_vocab) + ")")
        .WithReason(kReasonOutOfRange);
  }
  return static_cast<TokenId>(p.get<int64_t>());
}

// Reads `stop`: a string or an array of strings.
Status ReadStop(const json& body, std::vector<std::string>* out) {
  const json* v = FindField(body, "stop");
  if (v == nullptr) return Status::Ok();
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) {
      out->push_back(v->get<std::string>());
    }
    return Status::Ok();
  }
  if (!v->is_array()) return WrongType("stop", "a string or an array", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    const json& s = (*v)[i];
    if (!s.is_string()) {
      return WrongType("stop[" + std::to_string(i) + "]", "a string", s);
    }
    if (!s.get_ref<const std::string&>().empty()) {
      out->push_back(s.get<std::string>());
    }
  }
  return Status::Ok();
}

}  // namespace

Status LowerTokenLimit(const json& body,
                       std::initializer_list<const char*> keys,
                       int64_t min_value, json* fields) {
  if (FindField(body, "n_predict") != nullptr) return Status::Ok();
  for (const char* key : keys) {
    if (FindField(body, key) == nullptr) continue;
    int64_t n = 0;
    KV_RETURN_IF_ERROR(ReadInt(body, key, min_value, int64_t{1} << 31, &n));
    (*fields)["n_predict"] = n;
    return Status::Ok();
  }
  return Status::Ok();
}

namespace {

// Reads the integer fields that are limits (n_predict, id_slot, n_probs).
Status ParseLimitedFields(const json& body, const CompletionLimits& limits,
                          CompletionParams* params) {
  int64_t n_predict = limits.defaults.n_predict;
  KV_RETURN_IF_ERROR(ReadInt(body, "n_predict", -1, kInt32Max, &n_predict));
  // As llama-server: the server's -n is the budget of a request without
  // one (-1 included); a request's own budget wins, larger or not.
  if (n_predict < 0) n_predict = limits.defaults.n_predict;
  params->n_predict = static_cast<int32_t>(n_predict);

  int64_t id_slot = -1;
  KV_RETURN_IF_ERROR(ReadInt(body, "id_slot", -1, kInt32Max, &id_slot));
  if (limits.n_slots > 0 && id_slot >= int64_t{limits.n_slots}) {
    return InvalidArgumentError("field 'id_slot': slot " +
                                std::to_string(id_slot) +
                                " does not exist; valid: -1 (any) or [0, " +
                                std::to_string(limits.n_slots) + ")")
        .WithReason(kReasonSlotOutOfRange);
  }
  params->slot =
      id_slot < 0 ? std::nullopt : std::optional<uint32_t>(uint32_t(id_slot));

  int64_t n_probs = 0;
  KV_RETURN_IF_ERROR(ReadInt(body, "n_probs", 0, limits.max_n_probs, &n_probs));
  params->n_probs = static_cast<uint32_t>(n_probs);

  int64_t n_keep = params->n_keep;
  int64_t n_discard = params->n_discard;
  KV_RETURN_IF_ERROR(ReadInt(body, "n_keep", -1, kInt32Max, &n_keep));
  KV_RETURN_IF_ERROR(ReadInt(body, "n_discard", 0, kInt32Max, &n_discard));
  params->n_keep = static_cast<int32_t>(n_keep);
  params->n_discard = static_cast<int32_t>(n_discard);
  return Status::Ok();
}

// Reads the sampler's fields; -1 context windows become the slot's.
Status ParseSamplingFields(const json& body, const CompletionLimits& limits,
                           SamplingParams* s) {
  KV_RETURN_IF_ERROR(ReadSamplingFields(
      body, limits.tokenizer, s, limits.ordered_body,
      limits.compile_grammar ? &limits.compile_grammar : nullptr));
  s->ResolveContextSize(static_cast<int32_t>(limits.n_ctx_slot));
  return Status::Ok();
}

// Returns true when `prompt` holds no text and no token: "", [] or an array
// of empty strings.
bool PromptIsEmpty(const json& prompt) {
  if (prompt.is_string()) return prompt.get_ref<const std::string&>().empty();
  if (!prompt.is_array()) return false;
  for (const json& p : prompt) {
    if (!p.is_string() || !p.get_ref<const std::string&>().empty()) {
      return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<std::vector<TokenId>> TokenizePrompt(const json& prompt,
                                              const Tokenizer& tokenizer,
                                              bool add_special,
                                              std::string_view field) {
  if (prompt.is_string()) {
    return tokenizer.Tokenize(prompt.get_ref<const std::string&>(), add_special,
                              /*parse_special=*/true);
  }
  if (prompt.is_object()) {  // llama-server's {"prompt_string", ...} form
    const json* media = FindField(prompt, "multimodal_data");
    if (media != nullptr && !(media->is_array() && media->empty())) {
      return InvalidArgumentError("field '" + std::string(field) +
                                  ".multimodal_data': multimodal input is "
                                  "not supported by this model")
          .WithReason(kReasonUnsupportedContent);
    }
    const json* text = FindField(prompt, "prompt_string");
    if (text == nullptr || !text->is_string()) {
      return WrongType(std::string(field) + ".prompt_string", "a string",
                       text == nullptr ? json(nullptr) : *text);
    }
    return TokenizePrompt(*text, tokenizer, add_special, field);
  }
  if (!prompt.is_array()) {
    return WrongType(field, "a string or an array of token ids and strings",
                     prompt);
  }
  std::vector<TokenId> tokens;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& p = prompt[i];
    const std::string name = std::string(field) + "[" + std::to_string(i) + "]";
    if (p.is_string()) {
      // Like llama-server's tokenize_mixed: BOS only before a leading string.
      std::vector<TokenId> part = tokenizer.Tokenize(
          p.get_ref<const std::string&>(), add_special && i == 0, true);
      tokens.insert(tokens.end(), part.begin(), part.end());
    } else {
      KV_ASSIGN_OR_RETURN(TokenId id, ReadTokenId(p, tokenizer, name));
      tokens.push_back(id);
    }
  }
  return tokens;
}

namespace {

Status ReadResponseFields(const json& body, std::vector<std::string>* out) {
  const json* v = FindField(body, "response_fields");
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_array()) return WrongType("response_fields", "an array", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return WrongType("response_fields[" + std::to_string(i) + "]",
                       "a string", (*v)[i]);
    }
    out->push_back((*v)[i].get<std::string>());
  }
  return Status::Ok();
}

// Keeps the `fields` of `full` ("a/b" walks into objects); missing ones
// are left out, as llama-server does.
json SelectFields(const json& full, const std::vector<std::string>& fields) {
  json out = json::object();
  for (const std::string& path : fields) {
    const json* node = &full;
    size_t i = 0;
    while (node != nullptr && i <= path.size()) {
      size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      auto it = node->is_object() ? node->find(path.substr(i, j - i))
                                  : node->end();
      node = (node->is_object() && it != node->end()) ? &*it : nullptr;
      i = j + 1;
    }
    if (node != nullptr) out[path] = *node;
  }
  return out;
}

// The prompt as text, special tokens written out ("<s> Once").
std::string PromptText(const std::vector<TokenId>& prompt,
                       const Tokenizer& tokenizer) {
  std::string text;
  for (TokenId id : prompt) text += tokenizer.TokenToPiece(id, true);
  return text;
}

}  // namespace

Status ParseGenerationFields(const json& body, const CompletionLimits& limits,
                             CompletionRequest* out) {
  KV_RETURN_IF_ERROR(CheckUnsupportedFields(body));
  CompletionParams& params = out->params;
  params = limits.defaults;
  params.prompt.clear();
  KV_RETURN_IF_ERROR(ParseLimitedFields(body, limits, &params));
  KV_RETURN_IF_ERROR(ParseSamplingFields(body, limits, &params.sampling));
  KV_RETURN_IF_ERROR(ReadStop(body, &params.stop));
  KV_RETURN_IF_ERROR(ReadBool(body, "stream", &out->stream));
  KV_RETURN_IF_ERROR(ReadBool(body, "return_tokens", &out->return_tokens));
  KV_RETURN_IF_ERROR(ReadBool(body, "cache_prompt", &params.cache_prompt));
  KV_RETURN_IF_ERROR(ReadBool(body, "ignore_eos", &params.ignore_eos));
  // As llama-server: ignoring end of text is a -inf bias on every
  // end-of-generation token, shown in generation_settings.logit_bias.
  if (params.ignore_eos && limits.tokenizer != nullptr) {
    for (const LogitBias& b : EogLogitBias(limits.tokenizer->vocab())) {
      params.sampling.logit_bias.push_back(b);
    }
  }
  KV_RETURN_IF_ERROR(ReadResponseFields(body, &out->response_fields));
  KV_RETURN_IF_ERROR(ReadBool(body, "verbose", &out->verbose));
  KV_RETURN_IF_ERROR(
      ReadBool(body, "timings_per_token", &out->timings_per_token));
  KV_RETURN_IF_ERROR(
      ReadBool(body, "return_progress", &params.return_progress));
  KV_RETURN_IF_ERROR(
      ReadBool(body, "post_sampling_probs", &params.post_sampling_probs));
  return Status::Ok();
}

Status CheckPromptLength(size_t num_tokens, const CompletionLimits& limits) {
  if (num_tokens == 0) {
    return InvalidArgumentError(
               "field 'prompt': the prompt is empty (0 "
               "tokens)")
        .WithReason(kReasonEmptyPrompt);
  }
  return Status::Ok();
}

StatusOr<CompletionRequest> ParseCompletionRequest(
    const json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits) {
  CompletionRequest request;
  KV_RETURN_IF_ERROR(ParseGenerationFields(body, limits, &request));
  const json* prompt = FindField(body, "prompt");
  if (prompt == nullptr) {
    return InvalidArgumentError("field 'prompt' is required")
        .WithReason(kReasonMissingField);
  }
  KV_ASSIGN_OR_RETURN(request.params.prompt,
                      TokenizePrompt(*prompt, tokenizer, true, "prompt"));
  // The BOS token alone is no prompt: "" and [] are refused, not run.
  KV_RETURN_IF_ERROR(CheckPromptLength(
      PromptIsEmpty(*prompt) ? 0 : request.params.prompt.size(), limits));
  return request;
}

json GenerationSettingsJson(const CompletionParams& params) {
  json out = SamplingSettingsJson(params.sampling);
  out.update(json{{"n_predict", params.n_predict},
                  {"max_tokens", params.n_predict},
                  {"stop", params.stop},
                  {"n_probs", params.n_probs},
                  {"post_sampling_probs", params.post_sampling_probs},
                  {"ignore_eos", params.ignore_eos},
                  {"cache_prompt", params.cache_prompt},
                  {"n_keep", params.n_keep},
                  {"n_discard", params.n_discard}});
  return out;
}

json TimingsJson(const CompletionTimings& t) {
  auto per_token = [](uint64_t n, double ms) {
    return n == 0 ? 0.0 : ms / static_cast<double>(n);
  };
  auto per_second = [](uint64_t n, double ms) {
    return ms <= 0 ? 0.0 : 1e3 * static_cast<double>(n) / ms;
  };
  // As llama-server: the first output token comes from the prompt's last
  // batch, so the generation rate is over the decode steps after it.
  const uint64_t steps = t.predicted_n > 0 ? t.predicted_n - 1 : 0;
  return json{
      {"prompt_n", t.prompt_n},
      {"prompt_ms", t.prompt_ms},
      {"prompt_per_token_ms", per_token(t.prompt_n, t.prompt_ms)},
      {"prompt_per_second", per_second(t.prompt_n, t.prompt_ms)},
      {"predicted_n", t.predicted_n},
      {"predicted_ms", t.predicted_ms},
      {"predicted_per_token_ms", per_token(steps, t.predicted_ms)},
      {"predicted_per_second", per_second(steps, t.predicted_ms)},
      {"cache_n", t.cache_n}};
}

json PromptProgressJson(const PromptProgress& p) {
  return json{{"total", p.total},
              {"cache", p.cache},
              {"processed", p.processed},
              {"time_ms", static_cast<int64_t>(p.time_ms)}};
}

json TokenProbsJson(const TokenEvent& event, const Tokenizer& tokenizer) {
  auto entry = [&tokenizer](TokenId id) {
    std::string_view piece = tokenizer.TokenToPiece(id, true);
    return json{{"id", id},
                {"token", std::string(piece)},
                {"bytes", std::vector<uint8_t>(piece.begin(), piece.end())}};
  };
  json out = entry(event.token);
  json top = json::array();
  if (event.post_sampling) {  // llama-server's post_sampling_probs form
    out["prob"] = event.chosen_prob;
    for (const TokenProb& p : event.post_probs) {
      json e = entry(p.id);
      e["prob"] = p.prob;
      top.push_back(std::move(e));
    }
    out["top_probs"] = std::move(top);
    return out;
  }
  out["logprob"] = event.logprob;  // also when not among the top ones
  for (const TokenLogprob& p : event.probs) {
    json e = entry(p.id);
    e["logprob"] = p.logprob;
    top.push_back(std::move(e));
  }
  out["top_logprobs"] = std::move(top);
  return out;
}

json CompletionResponseJson(const CompletionRequest& request,
                            const CompletionResult& result,
                            const std::vector<TokenEvent>& events,
                            const Tokenizer& tokenizer) {
  json out{{"index", 0},
           {"content", result.content},
           {"tokens",
            request.return_tokens ? result.tokens : std::vector<TokenId>{}},
           {"id_slot", result.slot},
           {"stop", true},
           {"stop_type", result.stop_type},
           {"stopping_word", result.stopping_word},
           {"tokens_predicted", result.tokens_predicted},
           {"tokens_evaluated", result.tokens_evaluated},
           {"tokens_cached", result.tokens_cached},
           {"truncated", result.truncated},
           {"has_new_line", result.content.find('\n') != std::string::npos},
           {"generation_settings", GenerationSettingsJson(request.params)},
           {"prompt", PromptText(request.params.prompt, tokenizer)},
           {"timings", TimingsJson(result.timings)}};
  if (request.params.n_probs > 0) {
    json probs = json::array();
    for (const TokenEvent& e : events) {
      probs.push_back(TokenProbsJson(e, tokenizer));
    }
    out["completion_probabilities"] = std::move(probs);
  }
  if (!request.response_fields.empty()) {
    return SelectFields(out, request.response_fields);
  }
  return out;
}

CompletionStreamFormatter::CompletionStreamFormatter(CompletionRequest request,
                                                     const Tokenizer* tokenizer)
    : request_(std::move(request)), tokenizer_(tokenizer) {}

std::string CompletionStreamFormatter::Token(const TokenEvent& event,
                                             int slot) {
  const bool with_probs = request_.params.n_probs > 0;
  streamed_ += event.text;
  // One chunk per token, with its id, as llama-server streams them (text
  // held back for a stop string arrives in a later chunk).
  json j{{"index", 0},
         {"content", event.text},
         {"tokens", std::vector<TokenId>{event.token}},
         {"stop", false},
         {"id_slot", slot},
         {"tokens_predicted", event.timings.predicted_n},
         {"tokens_evaluated", request_.params.prompt.size()}};
  if (request_.timings_per_token) j["timings"] = TimingsJson(event.timings);
  if (with_probs) {
    j["completion_probabilities"] =
        json::array({TokenProbsJson(event, *tokenizer_)});
  }
  return SseData(j);
}

std::string CompletionStreamFormatter::Progress(const PromptProgress& progress,
                                                int slot) {
  json j{{"index", 0},
         {"content", ""},
         {"tokens", json::array()},
         {"stop", false},
         {"id_slot", slot},
         {"tokens_predicted", 0},
         {"tokens_evaluated", progress.total}};
  if (request_.timings_per_token) j["timings"] = TimingsJson(progress.timings);
  j["prompt_progress"] = PromptProgressJson(progress);
  return SseData(j);
}

std::string CompletionStreamFormatter::Done(const CompletionResult& result) {
  CompletionRequest no_probs = request_;
  no_probs.params.n_probs = 0;  // streamed with the tokens already
  no_probs.return_tokens = false;
  json j = CompletionResponseJson(no_probs, result, {}, *tokenizer_);
  // Only the tail held back for stop strings is still to be sent.
  j["content"] = result.content.compare(0, streamed_.size(), streamed_) == 0
                     ? result.content.substr(streamed_.size())
                     : std::string();
  j["generation_settings"] = GenerationSettingsJson(request_.params);
  return SseData(j);
}

StatusOr<std::string> HandleTokenize(const json& body,
                                     const Tokenizer& tokenizer) {
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
  KV_RETURN_IF_ERROR(ReadBool(body, "add_special", &add_special));
  KV_RETURN_IF_ERROR(ReadBool(body, "parse_special", &parse_special));
  KV_RETURN_IF_ERROR(ReadBool(body, "with_pieces", &with_pieces));
  const json* content = FindField(body, "content");
  if (content == nullptr) {
    return InvalidArgumentError("field 'content' is required")
        .WithReason(kReasonMissingField);
  }
  std::vector<TokenId> ids;
  if (content->is_string()) {
    ids = tokenizer.Tokenize(content->get_ref<const std::string&>(),
                             add_special, parse_special);
  } else {
    KV_ASSIGN_OR_RETURN(
        ids, TokenizePrompt(*content, tokenizer, add_special, "content"));
  }
  std::string out = "{\"tokens\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    const std::string id = std::to_string(ids[i]);
    if (!with_pieces) {
      out += id;
      continue;
    }
    std::string_view piece = tokenizer.TokenToPiece(ids[i], true);
    bool valid = true;
    for (size_t pos = 0; pos < piece.size() && valid;) {
      Utf8Decoded d = DecodeUtf8At(piece, pos);
      valid = d.step == Utf8Step::kValid;
      pos += d.num_bytes;
    }
    // Like llama-server: a piece that is not valid UTF-8 is sent as bytes.
    const json p = valid
                       ? json(std::string(piece))
                       : json(std::vector<uint8_t>(piece.begin(), piece.end()));
    out += "{\"id\":" + id + ",\"piece\":" + DumpJson(p) + "}";
  }
  return out + "]}";
}

StatusOr<json> HandleDetokenize(const json& body, const Tokenizer& tokenizer) {
  const json* tokens = FindField(body, "tokens");
  if (tokens == nullptr) return json{{"content", ""}};
  if (!tokens->is_array()) {
    return WrongType("tokens", "an array of token ids", *tokens);
  }
  std::vector<TokenId> ids;
  ids.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    KV_ASSIGN_OR_RETURN(TokenId id,
                        ReadTokenId((*tokens)[i], tokenizer,
                                    "tokens[" + std::to_string(i) + "]"));
    ids.push_back(id);
  }
  // As llama-server: the pieces as they are, special tokens written out
  // and the SentencePiece leading space kept (" Once upon").
  return json{{"content", PromptText(ids, tokenizer)}};
}

}  // namespace kvault
