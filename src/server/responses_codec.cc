// /v1/responses requests: the body -> chat messages -> CompletionRequest.
#include "server/responses_codec.h"

#include "server/anthropic_codec.h"
#include "server/json_fields.h"
#include "server/openai_codec.h"
#include "server/responses_tools.h"

namespace kvault {
namespace {

using nlohmann::json;

// Responses fields kvault cannot honour when set: refused, never ignored.
Status RefuseUnsupportedFields(const json& body) {
  static const char* const kRefused[][2] = {
      {"previous_response_id", "kvault stores no responses"},
      {"conversation", "kvault stores no conversations"},
      {"prompt", "kvault has no stored prompt templates"},
      {"reasoning", "reasoning effort and summaries are not supported"},
  };
  for (const auto& [field, why] : kRefused) {
    const json* v = FindField(body, field);
    if (v != nullptr && !(v->is_array() && v->empty())) {
      return UnsupportedField(field, why);
    }
  }
  bool flag = false;
  KV_RETURN_IF_ERROR(ReadBool(body, "background", &flag));
  if (flag) return UnsupportedField("background", "requests run in the foreground");
  flag = false;
  KV_RETURN_IF_ERROR(ReadBool(body, "store", &flag));
  if (flag) return UnsupportedField("store", "kvault stores no responses");
  const json* include = FindField(body, "include");
  if (include != nullptr && !(include->is_array() && include->empty())) {
    return UnsupportedField("include", "no extra output data is available");
  }
  return Status::Ok();
}

// Checks the fields whose only value kvault supports is the default.
Status CheckDefaultsOnly(const json& body) {
  std::string s;
  KV_RETURN_IF_ERROR(ReadString(body, "truncation", &s));
  if (!s.empty() && s != "disabled") {
    return UnsupportedField("truncation", "only \"disabled\" (got \"" + s + "\")");
  }
  if (const json* c = FindField(body, "tool_choice");
      c != nullptr && !ResponsesUsesTools(body)) {
    if (!(c->is_string() && (*c == "none" || *c == "auto"))) {
      return UnsupportedField("tool_choice", "there are no tools to choose");
    }
  }
  int64_t top_logprobs = 0;
  KV_RETURN_IF_ERROR(ReadInt(body, "top_logprobs", 0, 20, &top_logprobs));
  if (top_logprobs > 0) return UnsupportedField("top_logprobs", "no logprobs");
  const json* text = FindField(body, "text");
  if (text == nullptr) return Status::Ok();
  if (!text->is_object()) return WrongType("text", "an object", *text);
  if (const json* format = FindField(*text, "format")) {
    if (!format->is_object()) {
      return WrongType("text.format", "an object", *format);
    }
    KV_RETURN_IF_ERROR(ReadString(*format, "type", &s));
    if (s != "text") {
      return UnsupportedField("text.format.type",
                         "only \"text\" (got \"" + s + "\")");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> PartText(const json& part, const std::string& name) {
  if (!part.is_object()) return WrongType(name, "a content part object", part);
  std::string type;
  KV_RETURN_IF_ERROR(ReadString(part, "type", &type));
  if (type == "input_image") return ImageNotSupportedError();
  const char* key = type == "refusal" ? "refusal" : "text";
  if (type != "input_text" && type != "output_text" && type != "text" &&
      type != "refusal") {
    return InvalidArgumentError(
               "field '" + name + ".type': \"" + type +
               "\" parts are not supported (supported: input_text, "
               "output_text, refusal, input_image gives an error)")
        .WithReason(kReasonUnsupportedContent);
  }
  const json* t = FindField(part, key);
  if (t == nullptr || !t->is_string()) {
    return WrongType(name + "." + key, "a string",
                     t == nullptr ? json(nullptr) : *t);
  }
  return t->get<std::string>();
}

}  // namespace

StatusOr<std::string> ResponsesItemText(const json& content,
                                        const std::string& name) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return WrongType(name, "a string or an array of content parts", content);
  }
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    KV_ASSIGN_OR_RETURN(std::string text,
                        PartText(content[i],
                                 name + "[" + std::to_string(i) + "]"));
    if (!out.empty()) out += "\n";
    out += text;
  }
  return out;
}

namespace {

StatusOr<ChatMessage> ParseItem(const json& item, const std::string& name) {
  if (!item.is_object()) return WrongType(name, "an input item object", item);
  std::string type = "message";
  KV_RETURN_IF_ERROR(ReadString(item, "type", &type));
  if (type != "message") {
    return InvalidArgumentError("field '" + name + ".type': \"" + type +
                                "\" items are not supported (supported: "
                                "message, function_call, "
                                "function_call_output)")
        .WithReason(kReasonUnsupportedContent);
  }
  ChatMessage msg;
  KV_RETURN_IF_ERROR(ReadString(item, "role", &msg.role));
  if (msg.role == "developer") msg.role = "system";
  if (msg.role != "user" && msg.role != "assistant" && msg.role != "system") {
    return InvalidArgumentError("field '" + name +
                                ".role': expected user, assistant, system or "
                                "developer, got \"" +
                                msg.role + "\"")
        .WithReason(kReasonUnknownRole);
  }
  const json* content = FindField(item, "content");
  if (content == nullptr) {
    return InvalidArgumentError("field '" + name + ".content' is required")
        .WithReason(kReasonMissingField);
  }
  KV_ASSIGN_OR_RETURN(msg.content,
                      ResponsesItemText(*content, name + ".content"));
  return msg;
}

}  // namespace

StatusOr<std::vector<ChatMessage>> ResponsesChatMessages(const json& body) {
  std::vector<ChatMessage> out;
  std::string instructions;
  KV_RETURN_IF_ERROR(ReadString(body, "instructions", &instructions));
  if (!instructions.empty()) out.push_back({"system", instructions});
  const json* input = FindField(body, "input");
  if (input == nullptr) {
    return InvalidArgumentError("field 'input' is required")
        .WithReason(kReasonMissingField);
  }
  if (input->is_string()) {
    out.push_back({"user", input->get<std::string>()});
    return out;
  }
  if (!input->is_array() || input->empty()) {
    return WrongType("input", "a string or a non-empty array of items",
                     *input);
  }
  for (size_t i = 0; i < input->size(); ++i) {
    KV_ASSIGN_OR_RETURN(ChatMessage m,
                        ParseItem((*input)[i],
                                  "input[" + std::to_string(i) + "]"));
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<ResponsesRequest> ParseResponsesRequest(
    const json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits, const ChatFormat& format,
    const nlohmann::ordered_json* ordered) {
  KV_RETURN_IF_ERROR(RefuseUnsupportedFields(body));
  KV_RETURN_IF_ERROR(CheckDefaultsOnly(body));
  json fields = body;
  KV_RETURN_IF_ERROR(LowerTokenLimit(body, {"max_output_tokens"}, 1, &fields));
  ResponsesRequest out;
  KV_RETURN_IF_ERROR(
      ReadBool(body, "timings_per_token", &out.timings_per_token));
  KV_RETURN_IF_ERROR(ReadBool(body, "return_progress", &out.return_progress));
  if (const json* m = FindField(body, "metadata")) {
    if (!m->is_object()) return WrongType("metadata", "an object", *m);
    out.metadata = *m;
  }
  if (ResponsesUsesTools(body)) {
    // Function tools take the chat route's path (template, grammar, reply
    // parsing); the body is translated into its chat equivalent.
    const nlohmann::ordered_json own =
        ordered != nullptr ? *ordered : nlohmann::ordered_json::parse(body.dump());
    KV_ASSIGN_OR_RETURN(nlohmann::ordered_json chat, ResponsesToChatBody(own));
    KV_ASSIGN_OR_RETURN(out.completion,
                        ParseOaiChatRequest(json::parse(chat.dump()), tokenizer,
                                            limits, format, &chat));
  } else {
    KV_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages,
                        ResponsesChatMessages(body));
    KV_ASSIGN_OR_RETURN(out.completion, BuildChatRequest(fields, messages,
                                                         tokenizer, limits,
                                                         format));
  }
  // The engine reports each prompt batch; the stream carries them as
  // response.in_progress events.
  out.completion.params.return_progress = out.return_progress;
  return out;
}

}  // namespace kvault
