#include "server/chat_template.h"

#include <optional>
#include <string>
#include <vector>

namespace kvault {
namespace {

struct FamilyEntry {
  ChatTemplateFamily family;
  const char* name;
};

constexpr FamilyEntry kFamilies[] = {
    {ChatTemplateFamily::kChatml, "chatml"},
    {ChatTemplateFamily::kLlama2, "llama2"},
    {ChatTemplateFamily::kLlama3, "llama3"},
    {ChatTemplateFamily::kMistral, "mistral"},
    {ChatTemplateFamily::kZephyr, "zephyr"},
    {ChatTemplateFamily::kPhi3, "phi3"},
    {ChatTemplateFamily::kGemma, "gemma"},
    {ChatTemplateFamily::kCommandR, "command-r"},
};

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Strips leading and trailing whitespace, as Jinja's `trim` and Python's
// str.strip() do in the reference templates.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end + 1 - begin);
}

Status ValidateMessages(std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    return InvalidArgumentError("chat messages: expected at least one, got 0")
        .WithReason(kReasonEmptyMessages);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return InvalidArgumentError("messages[" + std::to_string(i) +
                                  "].role is \"" + role +
                                  "\"; expected system, user or assistant")
          .WithReason(kReasonUnknownRole);
    }
  }
  return Status::Ok();
}

// Joins a system prompt and the user message it is folded into.
using JoinSystemFn = std::string (*)(std::string_view system,
                                     std::string_view user);

// llama2: the system prompt is a <<SYS>> block at the start of the [INST].
std::string JoinLlama2System(std::string_view system, std::string_view user) {
  std::string out = "<<SYS>>\n";
  out.append(system).append("\n<</SYS>>\n\n").append(user);
  return out;
}

// mistral, gemma: the system prompt is a paragraph before the user's text.
std::string JoinPlainSystem(std::string_view system, std::string_view user) {
  std::string out(system);
  if (!user.empty()) out.append("\n\n").append(user);
  return out;
}

// For families without a system turn: returns `messages` with every run of
// system messages (joined by "\n\n") folded into the user message that
// follows it, or turned into a user message of its own when an assistant
// message or the end of the list follows instead.
std::vector<ChatMessage> FoldSystem(std::span<const ChatMessage> messages,
                                    JoinSystemFn join) {
  std::vector<ChatMessage> out;
  std::optional<std::string> pending;  // system text not yet placed
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      pending = pending ? *pending + "\n\n" + m.content : m.content;
      continue;
    }
    if (pending && m.role == "user") {
      out.push_back({"user", join(*pending, m.content)});
      pending.reset();
      continue;
    }
    if (pending) out.push_back({"user", join(*pending, "")});
    pending.reset();
    out.push_back(m);
  }
  if (pending) out.push_back({"user", join(*pending, "")});
  return out;
}

// <|im_start|>ROLE\nCONTENT<|im_end|>\n
std::string RenderChatml(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out.append("<|im_start|>").append(m.role).append("\n");
    out.append(m.content).append("<|im_end|>\n");
  }
  if (gen) out.append("<|im_start|>assistant\n");
  return out;
}

// <|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED<|eot_id|>
std::string RenderLlama3(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out.append("<|start_header_id|>").append(m.role);
    out.append("<|end_header_id|>\n\n").append(Trim(m.content));
    out.append("<|eot_id|>");
  }
  if (gen) out.append("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return out;
}

// <|ROLE|>\nCONTENT<|end|>\n
std::string RenderPhi3(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out.append("<|").append(m.role).append("|>\n");
    out.append(m.content).append("<|end|>\n");
  }
  if (gen) out.append("<|assistant|>\n");
  return out;
}

// <|ROLE|>\nCONTENT</s>\n
std::string RenderZephyr(std::span<const ChatMessage> messages, bool gen,
                         std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out.append("<|").append(m.role).append("|>\n");
    out.append(m.content).append(eos).append("\n");
  }
  if (gen) out.append("<|assistant|>\n");
  return out;
}

// <start_of_turn>user|model\nTRIMMED<end_of_turn>\n; the system prompt is
// prepended (untrimmed) to the trimmed text of the next user message.
std::string RenderGemma(std::span<const ChatMessage> messages, bool gen) {
  std::vector<ChatMessage> trimmed(messages.begin(), messages.end());
  for (ChatMessage& m : trimmed) {
    if (m.role != "system") m.content = std::string(Trim(m.content));
  }
  std::string out;
  for (const ChatMessage& m : FoldSystem(trimmed, JoinPlainSystem)) {
    out.append("<start_of_turn>");
    out.append(m.role == "assistant" ? "model" : m.role).append("\n");
    out.append(m.content).append("<end_of_turn>\n");
  }
  if (gen) out.append("<start_of_turn>model\n");
  return out;
}

// Command R: each turn, trimmed, between <|START_OF_TURN_TOKEN|><|ROLE|>
// and <|END_OF_TURN_TOKEN|> (SYSTEM, USER, CHATBOT).
std::string RenderCommandR(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const ChatMessage& m : messages) {
    const char* role = m.role == "system" ? "<|SYSTEM_TOKEN|>"
                       : m.role == "user" ? "<|USER_TOKEN|>"
                                          : "<|CHATBOT_TOKEN|>";
    out.append("<|START_OF_TURN_TOKEN|>").append(role);
    out.append(Trim(m.content)).append("<|END_OF_TURN_TOKEN|>");
  }
  if (gen) out.append("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
  return out;
}

// BOS[INST] TRIMMED [/INST] for user turns (no BOS at the very start),
// " TRIMMED EOS" for assistant turns. The [/INST] opens the assistant turn.
std::string RenderLlama2(std::span<const ChatMessage> messages,
                         std::string_view bos, std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : FoldSystem(messages, JoinLlama2System)) {
    if (m.role == "user") {
      if (!out.empty()) out.append(bos);
      out.append("[INST] ").append(Trim(m.content)).append(" [/INST]");
    } else {
      out.append(" ").append(Trim(m.content)).append(" ").append(eos);
    }
  }
  return out;
}

// Mistral-7B-Instruct v0.2: [INST] CONTENT [/INST] for user turns and
// CONTENT EOS (no space) for assistant turns; BOS only at the start, omitted.
std::string RenderMistral(std::span<const ChatMessage> messages,
                          std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : FoldSystem(messages, JoinPlainSystem)) {
    if (m.role == "user") {
      out.append("[INST] ").append(m.content).append(" [/INST]");
    } else {
      out.append(m.content).append(eos);
    }
  }
  return out;
}

}  // namespace

const char* ChatTemplateFamilyName(ChatTemplateFamily f) {
  for (const FamilyEntry& entry : kFamilies) {
    if (entry.family == f) return entry.name;
  }
  return "unknown";
}

std::optional<ChatTemplateFamily> DetectChatTemplate(std::string_view jinja) {
  // Most specific markers first: they never occur in the other families.
  if (Contains(jinja, "<|im_start|>")) return ChatTemplateFamily::kChatml;
  if (Contains(jinja, "<|start_header_id|>")) return ChatTemplateFamily::kLlama3;
  if (Contains(jinja, "<start_of_turn>")) return ChatTemplateFamily::kGemma;
  if (Contains(jinja, "<|START_OF_TURN_TOKEN|>")) {
    return ChatTemplateFamily::kCommandR;
  }
  if (Contains(jinja, "<|user|>")) {
    if (Contains(jinja, "<|end|>")) return ChatTemplateFamily::kPhi3;
    // Zephyr ends every turn with EOS; other <|user|> formats (ChatGLM) don't.
    if (Contains(jinja, "eos_token") || Contains(jinja, "</s>")) {
      return ChatTemplateFamily::kZephyr;
    }
    return std::nullopt;
  }
  if (Contains(jinja, "[INST]")) {
    return Contains(jinja, "<<SYS>>") ? ChatTemplateFamily::kLlama2
                                      : ChatTemplateFamily::kMistral;
  }
  return std::nullopt;
}

StatusOr<ChatTemplateFamily> ParseChatTemplateName(std::string_view name) {
  std::string valid;
  for (const FamilyEntry& entry : kFamilies) {
    if (name == entry.name) return entry.family;
    if (!valid.empty()) valid.append(", ");
    valid.append(entry.name);
  }
  return InvalidArgumentError("unknown chat template \"" + std::string(name) +
                              "\"; valid names: " + valid)
      .WithReason(kReasonUnknownChatTemplate);
}

StatusOr<std::string> RenderChat(ChatTemplateFamily f,
                                 std::span<const ChatMessage> messages,
                                 bool add_generation_prompt,
                                 std::string_view bos, std::string_view eos) {
  KV_RETURN_IF_ERROR(ValidateMessages(messages));
  const bool gen = add_generation_prompt;
  switch (f) {
    case ChatTemplateFamily::kChatml:
      return RenderChatml(messages, gen);
    case ChatTemplateFamily::kLlama2:
      return RenderLlama2(messages, bos, eos);
    case ChatTemplateFamily::kLlama3:
      return RenderLlama3(messages, gen);
    case ChatTemplateFamily::kMistral:
      return RenderMistral(messages, eos);
    case ChatTemplateFamily::kZephyr:
      return RenderZephyr(messages, gen, eos);
    case ChatTemplateFamily::kPhi3:
      return RenderPhi3(messages, gen);
    case ChatTemplateFamily::kGemma:
      return RenderGemma(messages, gen);
    case ChatTemplateFamily::kCommandR:
      return RenderCommandR(messages, gen);
  }
  return InvalidArgumentError("chat template family " +
                              std::to_string(static_cast<int>(f)) +
                              " is not one of the known families");
}

std::vector<std::string> ChatStopStrings(ChatTemplateFamily f) {
  switch (f) {
    case ChatTemplateFamily::kChatml:
      return {"<|im_end|>"};
    case ChatTemplateFamily::kLlama2:
    case ChatTemplateFamily::kMistral:
      // The turn ends with EOS; "[INST]" catches a model that runs on into
      // writing the next user turn itself.
      return {"</s>", "[INST]"};
    case ChatTemplateFamily::kLlama3:
      return {"<|eot_id|>"};
    case ChatTemplateFamily::kZephyr:
      return {"</s>"};
    case ChatTemplateFamily::kPhi3:
      return {"<|end|>"};
    case ChatTemplateFamily::kGemma:
      return {"<end_of_turn>"};
    case ChatTemplateFamily::kCommandR:
      return {"<|END_OF_TURN_TOKEN|>"};
  }
  return {};
}

}  // namespace kvault
