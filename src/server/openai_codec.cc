#include "server/openai_codec.h"

#include <memory>

#include "core/version.h"
#include "grammar/grammar.h"
#include "server/chat_tools.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// OpenAI's logprobs become llama-server's n_probs (unless it is given):
// for text completions `logprobs` is the number of top tokens (true: 1);
// for chat `logprobs` is a switch and `top_logprobs` the number (20 when
// omitted), which needs logprobs true.
Status MapLogprobs(const json& body, bool chat, json* out) {
  const json* logprobs = FindField(body, "logprobs");
  int64_t n = 0;
  if (chat) {
    bool on = false;
    int64_t top = 20;
    KV_RETURN_IF_ERROR(ReadBool(body, "logprobs", &on));
    KV_RETURN_IF_ERROR(ReadInt(body, "top_logprobs", 0, 1 << 20, &top));
    if (!on && FindField(body, "top_logprobs") != nullptr) {
      return InvalidArgumentError(
                 "field 'top_logprobs' requires 'logprobs' to be true")
          .WithReason(kReasonInvalidField);
    }
    n = on ? top : 0;
  } else if (logprobs != nullptr && logprobs->is_boolean()) {
    n = logprobs->get<bool>() ? 1 : 0;
  } else {
    KV_RETURN_IF_ERROR(ReadInt(body, "logprobs", 0, 1 << 20, &n));
  }
  if (FindField(body, "n_probs") == nullptr &&
      (n > 0 || logprobs != nullptr)) {
    (*out)["n_probs"] = n;
  }
  return Status::Ok();
}

// Applies the OpenAI spellings to a copy of `body`: max_tokens (and, for
// chat, max_completion_tokens) become n_predict unless n_predict is given;
// n must be 1.
StatusOr<json> NormalizeOaiFields(const json& body, bool chat) {
  json out = body;
  int64_t n = 1;
  KV_RETURN_IF_ERROR(ReadInt(body, "n", 1, 1 << 20, &n));
  if (n != 1) {
    return InvalidArgumentError(
               "field 'n': only one completion choice is "
               "allowed, got " +
               std::to_string(n))
        .WithReason(kReasonUnsupportedField);
  }
  KV_RETURN_IF_ERROR(MapLogprobs(body, chat, &out));
  // -1 as llama-server takes it: no budget of the request's own.
  if (chat) {
    KV_RETURN_IF_ERROR(LowerTokenLimit(
        body, {"max_completion_tokens", "max_tokens"}, -1, &out));
  } else {
    KV_RETURN_IF_ERROR(LowerTokenLimit(body, {"max_tokens"}, -1, &out));
  }
  return out;
}

// Returns the text of a message's content: a string, null (""), or an array
// of {type:"text", text} parts joined with "\n".
StatusOr<std::string> MessageText(const json& content,
                                  const std::string& field) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return WrongType(field, "a string or an array of text parts", content);
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string name = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return WrongType(name, "an object", part);
    std::string type;
    KV_RETURN_IF_ERROR(ReadString(part, "type", &type));
    if (type != "text") {
      return InvalidArgumentError("field '" + name +
                                  ".type': only \"text\" "
                                  "parts are supported, got \"" +
                                  type + "\"")
          .WithReason(kReasonUnsupportedContent);
    }
    const json* t = FindField(part, "text");
    if (t == nullptr || !t->is_string()) {
      return WrongType(name + ".text", "a string",
                       t == nullptr ? json(nullptr) : *t);
    }
    if (!text.empty()) text += "\n";
    text += t->get<std::string>();
  }
  return text;
}

// Reads stream_options: {include_usage: bool}.
Status ReadStreamOptions(const json& body, CompletionRequest* request) {
  const json* options = FindField(body, "stream_options");
  if (options == nullptr || options->is_null()) return Status::Ok();
  if (!options->is_object()) {
    return WrongType("stream_options", "an object", *options);
  }
  return ReadBool(*options, "include_usage", &request->include_usage);
}

// Reads add_generation_prompt (default true) and continue_final_message
// (llama-server's chat fields); returns whether to add the generation
// prompt.
// How the prompt ends: the assistant turn opened (add_generation_prompt),
// or the final assistant message continued (continue_final_message).
struct PromptEnding {
  bool add_generation_prompt = true;
  bool continue_final = false;
};

StatusOr<PromptEnding> ReadPromptEnding(const json& body) {
  PromptEnding e;
  KV_RETURN_IF_ERROR(
      ReadBool(body, "add_generation_prompt", &e.add_generation_prompt));
  KV_RETURN_IF_ERROR(
      ReadBool(body, "continue_final_message", &e.continue_final));
  if (e.add_generation_prompt && e.continue_final &&
      FindField(body, "add_generation_prompt")) {
    return InvalidArgumentError(
               "fields 'add_generation_prompt' and 'continue_final_message' "
               "cannot both be true")
        .WithReason(kReasonInvalidField);
  }
  if (e.continue_final) e.add_generation_prompt = false;
  return e;
}

StatusOr<bool> ReadGenerationPromptFields(const json& body) {
  KV_ASSIGN_OR_RETURN(PromptEnding e, ReadPromptEnding(body));
  if (e.continue_final) {
    return InvalidArgumentError(
               "field 'continue_final_message': true is for "
               "/v1/chat/completions")
        .WithReason(kReasonUnsupportedField);
  }
  return e.add_generation_prompt;
}

// A final assistant message the reply continues (llama-server's
// --prefill-assistant, on by default, or continue_final_message): it is
// taken off the rendered messages and its text appended to the prompt.
// Returns that text, or nullopt when the messages end otherwise.
StatusOr<std::optional<std::string>> TakePrefill(
    const PromptEnding& ending, bool prefill_assistant,
    std::vector<ChatMessage>* messages, ordered_json* messages_json) {
  const bool last_is_assistant =
      !messages->empty() && messages->back().role == "assistant" &&
      messages_json->is_array() && !messages_json->empty() &&
      !(messages_json->back().is_object() &&
        messages_json->back().contains("tool_calls"));
  if (ending.continue_final && !last_is_assistant) {
    return InvalidArgumentError(
               "field 'continue_final_message': the messages must end with "
               "an assistant message (without tool calls) to continue")
        .WithReason(kReasonInvalidMessages);
  }
  if (!last_is_assistant ||
      !(ending.continue_final ||
        (ending.add_generation_prompt && prefill_assistant))) {
    return std::optional<std::string>();
  }
  std::string text = messages->back().content;
  messages->pop_back();
  messages_json->erase(messages_json->size() - 1);
  return std::optional<std::string>(std::move(text));
}

}  // namespace

StatusOr<CompletionRequest> ParseOaiCompletionRequest(
    const json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits) {
  KV_ASSIGN_OR_RETURN(json normalized, NormalizeOaiFields(body, false));
  KV_ASSIGN_OR_RETURN(CompletionRequest request,
                      ParseCompletionRequest(normalized, tokenizer, limits));
  // Text completions always end with usage, so include_usage changes
  // nothing there; it is still type-checked.
  KV_RETURN_IF_ERROR(ReadStreamOptions(body, &request));
  return request;
}

StatusOr<std::vector<ChatMessage>> ParseChatMessages(const json& body) {
  const json* messages = FindField(body, "messages");
  if (messages == nullptr) {
    return InvalidArgumentError("field 'messages' is required")
        .WithReason(kReasonMissingField);
  }
  if (!messages->is_array() || messages->empty()) {
    return WrongType("messages", "a non-empty array of messages", *messages);
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return WrongType(name, "an object", m);
    ChatMessage msg;
    const json* role = FindField(m, "role");
    if (role == nullptr || !role->is_string()) {
      return WrongType(name + ".role", "a string",
                       role == nullptr ? json(nullptr) : *role);
    }
    msg.role = role->get<std::string>();
    if (msg.role != "system" && msg.role != "developer" &&
        msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return InvalidArgumentError("field '" + name +
                                  ".role': expected system, developer, user, "
                                  "assistant or tool, got \"" +
                                  msg.role + "\"")
          .WithReason(kReasonUnknownRole);
    }
    auto it = m.find("content");
    json content = it == m.end() ? json(nullptr) : *it;
    KV_ASSIGN_OR_RETURN(msg.content, MessageText(content, name + ".content"));
    out.push_back(std::move(msg));
  }
  if (out.size() >= 2 && out.back().role == "assistant" &&
      out[out.size() - 2].role == "assistant") {
    return InvalidArgumentError(
               "field 'messages': cannot have 2 or more assistant messages "
               "at the end of the list")
        .WithReason(kReasonInvalidMessages);
  }
  return out;
}

namespace {

// Fits the messages to the template as llama-server does: "developer" is
// "system" unless the template knows the role, and a content of text parts
// reaches it joined (as ParseChatMessages joins them) unless it renders
// only typed parts, when a string content becomes one text part.
ordered_json AdaptMessages(ordered_json raw, const ChatFormat& format) {
  if (!raw.is_array()) return raw;
  for (ordered_json& m : raw) {
    if (!m.is_object()) continue;
    auto role = m.find("role");
    if (role != m.end() && *role == "developer" &&
        !format.knows_developer_role()) {
      *role = "system";
    }
    auto content = m.find("content");
    if (content == m.end()) continue;
    if (format.requires_typed_content() && content->is_string()) {
      ordered_json part = ordered_json::object();
      part["type"] = "text";
      part["text"] = *content;
      *content = ordered_json::array({std::move(part)});
    } else if (!format.requires_typed_content() && content->is_array()) {
      StatusOr<std::string> text =
          MessageText(json::parse(content->dump()), "content");
      if (text.ok()) *content = *text;  // checked by ParseChatMessages
    }
  }
  return raw;
}

}  // namespace

StatusOr<std::string> ChatPromptText(const std::vector<ChatMessage>& messages,
                                     const Tokenizer& tokenizer,
                                     const ChatFormat& format,
                                     bool add_generation_prompt,
                                     const ordered_json* raw_messages,
                                     const ordered_json* vars) {
  const Vocab& vocab = tokenizer.vocab();
  std::string bos, eos;
  if (vocab.bos) bos = std::string(tokenizer.TokenToPiece(*vocab.bos, true));
  if (vocab.eos) eos = std::string(tokenizer.TokenToPiece(*vocab.eos, true));
  ordered_json raw = ordered_json::array();
  if (raw_messages != nullptr) {
    raw = *raw_messages;
  } else {
    for (const ChatMessage& m : messages) {
      raw.push_back({{"role", m.role}, {"content", m.content}});
    }
  }
  std::vector<ChatMessage> parsed = messages;
  for (ChatMessage& m : parsed) {
    if (m.role == "developer") m.role = "system";  // no built-in knows it
  }
  KV_ASSIGN_OR_RETURN(
      std::string text,
      format.Render(AdaptMessages(std::move(raw), format), parsed,
                    add_generation_prompt, bos, eos,
                    vars != nullptr ? *vars : ordered_json()));
  // Templates that write bos_token (Llama 3, Mistral, Gemma, Phi, ...) would
  // give two BOS with the one tokenizing adds: the tokenizer's wins, as in
  // llama-server (and the same for a closing EOS).
  if (vocab.add_bos && !bos.empty() && text.starts_with(bos)) {
    text.erase(0, bos.size());
  }
  if (vocab.add_eos && !eos.empty() && text.ends_with(eos)) {
    text.erase(text.size() - eos.size());
  }
  return text;
}

StatusOr<std::vector<TokenId>> TokenizeChat(
    const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer,
    const ChatFormat& format, bool add_generation_prompt,
    const ordered_json* raw_messages, const ordered_json* vars) {
  KV_ASSIGN_OR_RETURN(std::string prompt,
                      ChatPromptText(messages, tokenizer, format,
                                     add_generation_prompt, raw_messages,
                                     vars));
  return tokenizer.Tokenize(prompt, true, true);
}

const ordered_json* OrderedField(const ordered_json* body, const char* key) {
  if (body == nullptr || !body->is_object()) return nullptr;
  auto it = body->find(key);
  return it == body->end() || it->is_null() ? nullptr : &*it;
}

StatusOr<json> ApplyTemplate(const json& body, const ordered_json* ordered,
                             const Tokenizer& tokenizer,
                             const ChatFormat& format) {
  KV_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages,
                      ParseChatMessages(body));
  KV_ASSIGN_OR_RETURN(bool add_generation_prompt,
                      ReadGenerationPromptFields(body));
  // The template sees the request's tools (rendering them is all
  // /apply-template does; completions refuse tools until calls are parsed).
  ordered_json vars = ordered_json::object();
  if (const ordered_json* kwargs = OrderedField(ordered, "chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      return WrongType("chat_template_kwargs", "an object",
                       body.at("chat_template_kwargs"));
    }
    vars = *kwargs;
  }
  if (const ordered_json* tools = OrderedField(ordered, "tools")) {
    vars["tools"] = *tools;
  }
  KV_ASSIGN_OR_RETURN(std::string prompt,
                      ChatPromptText(messages, tokenizer, format,
                                     add_generation_prompt,
                                     OrderedField(ordered, "messages"), &vars));
  return json{{"prompt", std::move(prompt)}};
}

StatusOr<CompletionRequest> BuildChatRequest(
    const json& fields, const std::vector<ChatMessage>& messages,
    const Tokenizer& tokenizer, const CompletionLimits& limits,
    const ChatFormat& format, bool add_generation_prompt,
    const ordered_json* ordered) {
  CompletionRequest request;
  KV_RETURN_IF_ERROR(ParseGenerationFields(fields, limits, &request));
  KV_ASSIGN_OR_RETURN(
      request.params.prompt,
      TokenizeChat(messages, tokenizer, format, add_generation_prompt,
                   OrderedField(ordered, "messages"),
                   OrderedField(ordered, "chat_template_kwargs")));
  KV_RETURN_IF_ERROR(CheckPromptLength(request.params.prompt.size(), limits));
  for (std::string& s : format.StopStrings()) {
    request.params.stop.push_back(std::move(s));
  }
  return request;
}

namespace {

// The chat fields PlanChatTools reads (the generic check refuses them on
// the other routes).
constexpr const char* kChatToolFields[] = {
    "tools", "tool_choice", "parallel_tool_calls", "parse_tool_calls",
    "reasoning_format", "reasoning_effort"};

// The template variables of a chat request: the plan's (tools, reasoning)
// under the request's chat_template_kwargs, which win.
StatusOr<ordered_json> ChatVars(const json& body, const ordered_json* ordered,
                                const ChatToolPlan& plan) {
  ordered_json vars = plan.vars;
  if (const ordered_json* kw = OrderedField(ordered, "chat_template_kwargs")) {
    if (!kw->is_object()) {
      return WrongType("chat_template_kwargs", "an object",
                       body.at("chat_template_kwargs"));
    }
    for (const auto& [k, v] : kw->items()) vars[k] = v;
  }
  return vars;
}

// Sets the grammar that forces a tool call; a request that also brings its
// own grammar, json_schema or response_format cannot have both.
Status ApplyToolGrammar(const ChatToolPlan& plan, CompletionRequest* request) {
  KV_ASSIGN_OR_RETURN(std::string grammar, ToolGrammar(plan));
  if (grammar.empty()) return Status::Ok();
  if (request->params.sampling.grammar != nullptr) {
    return InvalidArgumentError(
               "tools with tool_choice \"required\", a named tool, or a "
               "template without tool support constrain the output with a "
               "grammar; 'grammar', 'json_schema' and 'response_format' "
               "cannot be added to them")
        .WithReason(kReasonInvalidTools);
  }
  StatusOr<Grammar> g = Grammar::Parse(grammar);
  if (!g.ok()) return g.status().WithContext("tool-call grammar");
  request->params.sampling.grammar =
      std::make_shared<const Grammar>(std::move(*g));
  request->params.sampling.grammar_text = std::move(grammar);
  return Status::Ok();
}

// The test hook: "__kvault_scripted_output" becomes the reply's tokens.
Status ApplyScriptedOutput(const json& body, const CompletionLimits& limits,
                           const Tokenizer& tokenizer,
                           CompletionRequest* request) {
  const json* text = FindField(body, "__kvault_scripted_output");
  if (text == nullptr || !limits.test_hooks) return Status::Ok();
  if (!text->is_string()) {
    return WrongType("__kvault_scripted_output", "a string", *text);
  }
  request->params.sampling.scripted_tokens =
      tokenizer.Tokenize(text->get<std::string>(), false, true);
  return Status::Ok();
}

}  // namespace

StatusOr<ChatPrompt> BuildChatPrompt(const json& body,
                                     const ordered_json* ordered,
                                     const Tokenizer& tokenizer,
                                     const ChatFormat& format,
                                     const ChatOutputOptions& options) {
  KV_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages,
                      ParseChatMessages(body));
  KV_ASSIGN_OR_RETURN(PromptEnding ending, ReadPromptEnding(body));
  ChatPrompt out;
  KV_ASSIGN_OR_RETURN(out.plan, PlanChatTools(body, ordered, format, options));
  KV_ASSIGN_OR_RETURN(ordered_json vars, ChatVars(body, ordered, out.plan));
  const ordered_json* raw = OrderedField(ordered, "messages");
  ordered_json messages_json = MessagesForTemplate(
      raw != nullptr ? *raw : ordered_json::parse(body.at("messages").dump()),
      out.plan.system_prompt);
  KV_ASSIGN_OR_RETURN(std::optional<std::string> prefill,
                      TakePrefill(ending, options.prefill_assistant, &messages,
                                  &messages_json));
  KV_ASSIGN_OR_RETURN(
      std::string prompt,
      ChatPromptText(messages, tokenizer, format,
                     ending.add_generation_prompt || prefill.has_value(),
                     &messages_json, &vars));
  if (prefill) prompt += *prefill;
  NoteForcedThinking(prompt, &out.plan.syntax);
  out.tokens = tokenizer.Tokenize(prompt, true, true);
  return out;
}

StatusOr<CompletionRequest> ParseOaiChatRequest(const json& body,
                                                const Tokenizer& tokenizer,
                                                const CompletionLimits& limits,
                                                const ChatFormat& format,
                                                const ordered_json* ordered) {
  KV_ASSIGN_OR_RETURN(json normalized, NormalizeOaiFields(body, true));
  for (const char* key : kChatToolFields) normalized.erase(key);
  // Field errors come in the order the old parser reported them: the
  // generation fields first, then the messages.
  CompletionRequest request;
  KV_RETURN_IF_ERROR(ParseGenerationFields(normalized, limits, &request));
  KV_ASSIGN_OR_RETURN(ChatPrompt chat,
                      BuildChatPrompt(body, ordered, tokenizer, format,
                                      limits.chat_output));
  ChatToolPlan& plan = chat.plan;
  request.params.prompt = std::move(chat.tokens);
  KV_RETURN_IF_ERROR(CheckPromptLength(request.params.prompt.size(), limits));
  for (std::string& s : format.StopStrings()) {
    request.params.stop.push_back(std::move(s));
  }
  KV_RETURN_IF_ERROR(ApplyToolGrammar(plan, &request));
  KV_RETURN_IF_ERROR(ApplyScriptedOutput(body, limits, tokenizer, &request));
  if (plan.parse) request.chat_syntax = plan.syntax;
  KV_RETURN_IF_ERROR(ReadStreamOptions(body, &request));
  return request;
}

std::string FinishReason(const CompletionResult& result) {
  return result.stop_type == "limit" || result.truncated ? "length" : "stop";
}

std::string SystemFingerprint() {
  return std::string("b") + kKvaultVersion + "-kvault";
}

json UsageJson(const CompletionResult& result) {
  return json{
      {"prompt_tokens", result.tokens_evaluated},
      {"completion_tokens", result.tokens_predicted},
      {"total_tokens", result.tokens_evaluated + result.tokens_predicted},
      {"prompt_tokens_details", {{"cached_tokens", result.timings.cache_n}}}};
}

json OaiEnvelope(const char* object, const OaiContext& ctx, json choices) {
  return json{{"id", ctx.id},
              {"object", object},
              {"created", ctx.created},
              {"model", ctx.model},
              {"system_fingerprint", SystemFingerprint()},
              {"choices", std::move(choices)}};
}

namespace {

// The envelope both non-streamed OpenAI replies share around one choice.
json OaiReplyJson(const char* object, json choice,
                  const CompletionResult& result, const OaiContext& ctx) {
  json out = OaiEnvelope(object, ctx, json::array({std::move(choice)}));
  out["usage"] = UsageJson(result);
  out["id_slot"] = result.slot;
  out["timings"] = TimingsJson(result.timings);
  return out;
}

}  // namespace

json OaiLogprobsJson(const std::vector<TokenEvent>& events,
                     const Tokenizer& tokenizer) {
  json content = json::array();
  for (const TokenEvent& e : events) {
    content.push_back(TokenProbsJson(e, tokenizer));
  }
  return json{{"content", std::move(content)}};
}

json OaiCompletionJson(const CompletionResult& result, const OaiContext& ctx,
                       const std::vector<TokenEvent>& events) {
  json choice{{"text", result.content},
              {"index", 0},
              {"logprobs", nullptr},
              {"finish_reason", FinishReason(result)}};
  if (ctx.n_probs > 0 && ctx.tokenizer != nullptr) {
    choice["logprobs"] = OaiLogprobsJson(events, *ctx.tokenizer);
  }
  return OaiReplyJson("text_completion", std::move(choice), result, ctx);
}

json OaiChatJson(const CompletionResult& result, const OaiContext& ctx,
                 const std::vector<TokenEvent>& events) {
  json choice{{"index", 0},
              {"message", {{"role", "assistant"}, {"content", result.content}}},
              {"finish_reason", FinishReason(result)}};
  if (ctx.chat_syntax) {
    ChatReplyReader reader(*ctx.chat_syntax);
    choice["message"] =
        reader.Message(result.content, FinishReason(result) == "length");
    choice["finish_reason"] =
        ChatFinishReason(FinishReason(result), reader.has_tool_calls());
  }
  if (ctx.n_probs > 0 && ctx.tokenizer != nullptr) {
    choice["logprobs"] = OaiLogprobsJson(events, *ctx.tokenizer);
  }
  return OaiReplyJson("chat.completion", std::move(choice), result, ctx);
}

json OaiModelsJson(const OaiModelInfo& info) {
  json model{{"id", info.id},
             {"object", "model"},
             {"created", info.created},
             {"owned_by", "kvault"},
             {"aliases", info.aliases},
             {"tags", info.tags},
             {"meta",
              {{"n_vocab", info.n_vocab},
               {"n_ctx_train", info.n_ctx_train},
               {"n_params", info.n_params},
               {"size", info.size_bytes}}}};
  return json{{"object", "list"}, {"data", json::array({std::move(model)})}};
}

}  // namespace kvault
