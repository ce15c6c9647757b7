// Chat templates: turn an OpenAI-style message list into one model's prompt
// text for POST /v1/chat/completions. kvault runs no Jinja: it recognises the
// common template families from the GGUF's `tokenizer.chat_template` by their
// distinctive markers and renders each family in C++, byte for byte as the
// family's reference (Hugging Face) template renders it.
//
// BOS rule: a family whose template begins with `bos_token` (llama2, llama3,
// mistral, gemma) does NOT write BOS at the very start of the text; the server
// tokenizes the result with parse_special=true and the tokenizer adds BOS when
// the vocabulary wants it, so BOS never appears twice. BOS inside the history
// (llama2 writes "<s>[INST]" before every later user turn) and EOS after
// assistant turns (llama2, mistral, zephyr) are written as the `bos`/`eos`
// piece texts passed in.
//
// System prompts: chatml, llama3, phi3 and zephyr have a system turn. llama2
// puts the system prompt inside the next [INST] as "<<SYS>>\n...\n<</SYS>>\n\n";
// mistral and gemma have no system role, so it is prepended to the next user
// message followed by "\n\n" (a system message with no user message after it,
// before an assistant turn or at the end, becomes a user turn of its own).
#ifndef KVAULT_SERVER_CHAT_TEMPLATE_H_
#define KVAULT_SERVER_CHAT_TEMPLATE_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault {

// One chat message; role is "system", "user" or "assistant".
struct ChatMessage {
  std::string role;
  std::string content;
};

enum class ChatTemplateFamily {
  kChatml,
  kLlama2,
  kLlama3,
  kMistral,
  kZephyr,
  kPhi3,
  kGemma,
  kCommandR,
};

// Returns the family's command-line name: "chatml", "llama2", "llama3",
// "mistral", "zephyr", "phi3" or "gemma".
const char* ChatTemplateFamilyName(ChatTemplateFamily f);

// Returns the family a GGUF tokenizer.chat_template Jinja string belongs to,
// recognised by its markers; nullopt when none matches (the caller falls back
// to chatml and logs).
std::optional<ChatTemplateFamily> DetectChatTemplate(std::string_view jinja);

// Returns the family named `name` (exact, lower case, as on --chat-template);
// InvalidArgument (reason "unknown_chat_template") listing the valid names.
StatusOr<ChatTemplateFamily> ParseChatTemplateName(std::string_view name);

// Returns `messages` rendered as family `f`'s prompt text, ending with the
// assistant turn opener when add_generation_prompt (llama2 and mistral have
// none: their user turn's "[/INST]" already opens it); `bos`/`eos` are the
// vocabulary's BOS/EOS piece texts. InvalidArgument for an empty list (reason
// "empty_messages") or a role other than system/user/assistant (reason
// "unknown_role").
StatusOr<std::string> RenderChat(ChatTemplateFamily f,
                                 std::span<const ChatMessage> messages,
                                 bool add_generation_prompt,
                                 std::string_view bos, std::string_view eos);

// Returns the texts that end an assistant turn in family `f`, to use as stop
// strings so generation ends even when the model spells the end marker as text
// instead of emitting the EOS/EOG token.
std::vector<std::string> ChatStopStrings(ChatTemplateFamily f);

}  // namespace kvault

#endif  // KVAULT_SERVER_CHAT_TEMPLATE_H_
