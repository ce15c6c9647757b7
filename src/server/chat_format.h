// ChatFormat: how a chat request's messages become the prompt text. With
// Jinja on (the default, as llama-server's --jinja) it is a Jinja chat
// template -- --chat-template SOURCE, --chat-template-file, or the model's
// tokenizer.chat_template -- rendered as Hugging Face transformers renders
// it (messages as sent, add_generation_prompt, bos_token, eos_token, tools,
// and chat_template_kwargs as top-level variables). Otherwise (--no-jinja,
// a built-in name given to --chat-template, or no template at all) it is
// one of kvault's built-in families, rendered by hand.
#ifndef KVAULT_SERVER_CHAT_FORMAT_H_
#define KVAULT_SERVER_CHAT_FORMAT_H_

#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_syntax.h"
#include "core/status_or.h"
#include "jinja/template.h"
#include "server/chat_template.h"

namespace kvault {

class ChatFormat {
 public:
  // A built-in family.
  ChatFormat(ChatTemplateFamily family = ChatTemplateFamily::kChatml);  // NOLINT: a family is a format
  // Parses a Jinja template; the error carries its line and column.
  static StatusOr<ChatFormat> FromJinja(std::string source);

  // Returns the prompt for the messages of a chat body (`messages` as the
  // client sent them, keys in their order, which tojson keeps; `parsed`
  // checked by ParseChatMessages). `kwargs`
  // (an object; may be null) become template variables over `defaults`;
  // the built-in families take none. Render errors are InvalidArgument
  // (reason "template_error") with jinja's message.
  StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                               const std::vector<ChatMessage>& parsed,
                               bool add_generation_prompt,
                               const std::string& bos, const std::string& eos,
                               const nlohmann::ordered_json& kwargs) const;
  // Returns the stop strings a built-in family adds (none for Jinja: the
  // model's end-of-generation tokens end the turn).
  std::vector<std::string> StopStrings() const;
  // Returns the template source, or the family's name.
  std::string Describe() const;
  // Returns true for a Jinja template.
  bool is_jinja() const { return jinja_ != nullptr; }
  // Returns the tool-call syntax the Jinja template teaches (detected from
  // its source); kContentOnly for a built-in family.
  chat::ToolCallFormat tool_call_format() const { return tool_call_format_; }
  // Returns true when the Jinja template knows reasoning (it names a
  // thinking tag, enable_thinking or reasoning_content).
  bool thinks() const { return thinks_; }
  // Returns true when the Jinja template names the "developer" role (as
  // GPT-OSS's does); otherwise developer messages are rendered as system.
  bool knows_developer_role() const { return knows_developer_; }
  // Returns true when the Jinja template renders a message's content only
  // as a list of typed parts; otherwise text parts reach it joined.
  bool requires_typed_content() const { return requires_typed_content_; }
  // Returns /props' chat_template_caps: what the template's source handles
  // (tools, tool_calls, a system role, reasoning) and the tool-call syntax.
  nlohmann::json CapsJson() const;

  // Server-wide template variables (--chat-template-kwargs).
  nlohmann::json default_kwargs = nlohmann::json::object();
  // The clock strftime_now reads; unset: KVAULT_FAKE_NOW when set
  // ("2026-01-15T09:30:00"), else the local time.
  std::function<std::tm()> now;

 private:
  // OK unless a built-in family is asked to render variables (the
  // server's --chat-template-kwargs or the request's), which it cannot.
  Status CheckNoVariables(const nlohmann::ordered_json& kwargs) const;
  // Renders the Jinja template over `messages` and the variables.
  StatusOr<std::string> RenderJinja(const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt,
                                    const std::string& bos,
                                    const std::string& eos,
                                    const nlohmann::ordered_json& kwargs) const;
  // Probes the template: true when a string content does not come out and
  // the same text as a typed part does.
  bool ProbeRequiresTypedContent() const;

  ChatTemplateFamily family_;
  std::shared_ptr<const jinja::Template> jinja_;
  std::string source_;
  chat::ToolCallFormat tool_call_format_ = chat::ToolCallFormat::kContentOnly;
  bool thinks_ = false;
  bool knows_developer_ = false;
  bool requires_typed_content_ = false;
};

// Returns the local time, or KVAULT_FAKE_NOW's when that is set and reads
// as YYYY-MM-DDTHH:MM:SS.
std::tm ChatTemplateNow();

}  // namespace kvault

#endif  // KVAULT_SERVER_CHAT_FORMAT_H_
