#include "server/chat_format.h"

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "chat/format_detect.h"
#include "jinja/strftime.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

}  // namespace

std::tm ChatTemplateNow() {
  std::tm tm{};
  const char* fake = std::getenv("KVAULT_FAKE_NOW");
  if (fake != nullptr && jinja::ParseIsoDateTime(fake, &tm)) return tm;
  const std::time_t now = std::time(nullptr);
  localtime_r(&now, &tm);
  return tm;
}

ChatFormat::ChatFormat(ChatTemplateFamily family) : family_(family) {}

StatusOr<ChatFormat> ChatFormat::FromJinja(std::string source) {
  StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  if (!t.ok()) {
    return InvalidArgumentError("chat template: " +
                                std::string(t.status().message()));
  }
  ChatFormat format;
  format.jinja_ = std::make_shared<const jinja::Template>(std::move(*t));
  format.source_ = std::move(source);
  format.tool_call_format_ = chat::DetectToolCallFormat(format.source_);
  for (const char* mark : {"think>", "enable_thinking", "reasoning_content",
                           "<|channel|>analysis"}) {
    if (format.source_.find(mark) != std::string::npos) format.thinks_ = true;
  }
  format.knows_developer_ =
      format.source_.find("developer") != std::string::npos;
  format.requires_typed_content_ = format.ProbeRequiresTypedContent();
  return format;
}

bool ChatFormat::ProbeRequiresTypedContent() const {
  const std::string probe = "kvault content probe 7f3a";
  auto shows = [&](ordered_json content) {
    ordered_json message = ordered_json::object();
    message["role"] = "user";
    message["content"] = std::move(content);
    StatusOr<std::string> out =
        RenderJinja(ordered_json::array({std::move(message)}), false, "", "",
                    ordered_json::object());
    return out.ok() && out->find(probe) != std::string::npos;
  };
  ordered_json part = ordered_json::object();
  part["type"] = "text";
  part["text"] = probe;
  return !shows(probe) && shows(ordered_json::array({std::move(part)}));
}

nlohmann::json ChatFormat::CapsJson() const {
  auto names = [this](const char* text) {
    return source_.find(text) != std::string::npos;
  };
  return nlohmann::json{
      {"supports_tools", is_jinja() && names("tools")},
      {"supports_tool_calls", is_jinja() && names("tool_calls")},
      {"supports_system_role", !is_jinja() || names("system")},
      {"supports_parallel_tool_calls",
       is_jinja() && names("tool_calls") && names("for")},
      {"supports_reasoning", thinks_},
      {"tool_call_format", chat::ToolCallFormatName(tool_call_format_)}};
}

StatusOr<std::string> ChatFormat::Render(const ordered_json& messages,
                                         const std::vector<ChatMessage>& parsed,
                                         bool add_generation_prompt,
                                         const std::string& bos,
                                         const std::string& eos,
                                         const ordered_json& kwargs) const {
  if (!kwargs.is_null() && !kwargs.is_object()) {
    return WrongType("chat_template_kwargs", "an object",
                     json::parse(kwargs.dump()));
  }
  if (jinja_ == nullptr) {
    KV_RETURN_IF_ERROR(CheckNoVariables(kwargs));
    return RenderChat(family_, parsed, add_generation_prompt, bos, eos);
  }
  return RenderJinja(messages, add_generation_prompt, bos, eos, kwargs);
}

StatusOr<std::string> ChatFormat::RenderJinja(const ordered_json& messages,
                                              bool add_generation_prompt,
                                              const std::string& bos,
                                              const std::string& eos,
                                              const ordered_json& kwargs) const {
  ordered_json context = ordered_json::object();
  if (default_kwargs.is_object()) {
    for (auto it = default_kwargs.begin(); it != default_kwargs.end(); ++it) {
      context[it.key()] = ordered_json::parse(it.value().dump());
    }
  }
  if (kwargs.is_object()) {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      context[it.key()] = it.value();
    }
  }
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos;
  context["eos_token"] = eos;
  jinja::RenderOptions options;
  options.now = now ? now : ChatTemplateNow;
  StatusOr<std::string> out = jinja_->Render(context, options);
  if (!out.ok()) {
    return InvalidArgumentError("chat template: " +
                                std::string(out.status().message()))
        .WithReason(kReasonTemplateError);
  }
  return out;
}

Status ChatFormat::CheckNoVariables(const ordered_json& kwargs) const {
  const std::string why = std::string("the built-in ") +
                          ChatTemplateFamilyName(family_) +
                          " template takes no variables (start kvault with "
                          "--jinja and a Jinja chat template)";
  if (default_kwargs.is_object() && !default_kwargs.empty()) {
    return InvalidArgumentError("flag --chat-template-kwargs: " + why)
        .WithReason(kReasonUnsupportedField);
  }
  if (!kwargs.is_object() || kwargs.empty()) return Status::Ok();
  // /apply-template hands the request's tools over as a variable.
  return UnsupportedField(
      kwargs.contains("tools") ? "tools" : "chat_template_kwargs", why);
}

std::vector<std::string> ChatFormat::StopStrings() const {
  if (jinja_ != nullptr) return {};
  return ChatStopStrings(family_);
}

std::string ChatFormat::Describe() const {
  return jinja_ != nullptr ? source_ : ChatTemplateFamilyName(family_);
}

}  // namespace kvault
