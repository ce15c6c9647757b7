#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvault {
namespace {

// Short but representative tokenizer.chat_template strings, as they appear in
// GGUF metadata (a "\n" inside a Jinja string literal is backslash + n).
constexpr const char* kChatmlJinja =
    R"({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})";
constexpr const char* kLlama2Jinja =
    R"({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})";
constexpr const char* kLlama3Jinja =
    R"({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})";
constexpr const char* kMistralJinja =
    R"({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})";
constexpr const char* kZephyrJinja = R"({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})";
// Contains eos_token too: phi3 must win over zephyr on "<|end|>".
constexpr const char* kPhi3Jinja =
    R"({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %})";
constexpr const char* kGemmaJinja =
    R"({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %})";

const std::vector<ChatMessage> kConversation = {
    {"system", "You are helpful."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "How are you?"},
};

struct FamilyCase {
  ChatTemplateFamily family;
  const char* name;
  const char* jinja;
  const char* bos;
  const char* eos;
  std::string rendered;    // kConversation, add_generation_prompt=false
  std::string gen_suffix;  // what add_generation_prompt=true appends
};

std::vector<FamilyCase> AllFamilies() {
  return {
      {ChatTemplateFamily::kChatml, "chatml", kChatmlJinja, "<s>", "</s>",
       "<|im_start|>system\nYou are helpful.<|im_end|>\n"
       "<|im_start|>user\nHi<|im_end|>\n"
       "<|im_start|>assistant\nHello!<|im_end|>\n"
       "<|im_start|>user\nHow are you?<|im_end|>\n",
       "<|im_start|>assistant\n"},
      {ChatTemplateFamily::kLlama2, "llama2", kLlama2Jinja, "<s>", "</s>",
       "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST]"
       " Hello! </s><s>[INST] How are you? [/INST]",
       ""},
      {ChatTemplateFamily::kLlama3, "llama3", kLlama3Jinja,
       "<|begin_of_text|>", "<|end_of_text|>",
       "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {ChatTemplateFamily::kMistral, "mistral", kMistralJinja, "<s>", "</s>",
       "[INST] You are helpful.\n\nHi [/INST]Hello!</s>"
       "[INST] How are you? [/INST]",
       ""},
      {ChatTemplateFamily::kZephyr, "zephyr", kZephyrJinja, "<s>", "</s>",
       "<|system|>\nYou are helpful.</s>\n<|user|>\nHi</s>\n"
       "<|assistant|>\nHello!</s>\n<|user|>\nHow are you?</s>\n",
       "<|assistant|>\n"},
      {ChatTemplateFamily::kPhi3, "phi3", kPhi3Jinja, "<s>", "<|endoftext|>",
       "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi<|end|>\n"
       "<|assistant|>\nHello!<|end|>\n<|user|>\nHow are you?<|end|>\n",
       "<|assistant|>\n"},
      {ChatTemplateFamily::kGemma, "gemma", kGemmaJinja, "<bos>", "<eos>",
       "<start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n"
       "<start_of_turn>model\nHello!<end_of_turn>\n"
       "<start_of_turn>user\nHow are you?<end_of_turn>\n",
       "<start_of_turn>model\n"},
  };
}

std::string Render(ChatTemplateFamily f, const std::vector<ChatMessage>& msgs,
                   bool gen, std::string_view bos = "<s>",
                   std::string_view eos = "</s>") {
  StatusOr<std::string> out = RenderChat(f, msgs, gen, bos, eos);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::string();
}

TEST(ChatTemplateTest, DetectsEachFamilyFromItsTemplate) {
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    std::optional<ChatTemplateFamily> got = DetectChatTemplate(c.jinja);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(ChatTemplateFamilyName(*got), std::string(c.name));
  }
}

TEST(ChatTemplateTest, UnknownTemplatesAreNotDetected) {
  const char* vicuna =
      R"({% for message in messages %}{% if message['role'] == 'user' %}{{ 'USER: ' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT: ' + message['content'] + eos_token + '\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %})";
  // <|user|> without an end-of-turn EOS is not zephyr (ChatGLM-style).
  const char* glm =
      R"([gMASK]<sop>{% for m in messages %}{% if m['role'] == 'user' %}<|user|>\n{{ m['content'] }}{% else %}<|assistant|>\n{{ m['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %})";
  EXPECT_EQ(DetectChatTemplate(vicuna), std::nullopt);
  EXPECT_EQ(DetectChatTemplate(glm), std::nullopt);
  EXPECT_EQ(DetectChatTemplate(""), std::nullopt);
  EXPECT_EQ(DetectChatTemplate("{{ messages[0]['content'] }}"), std::nullopt);
}

TEST(ChatTemplateTest, RendersConversationExactly) {
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Render(c.family, kConversation, false, c.bos, c.eos),
              c.rendered);
    EXPECT_EQ(Render(c.family, kConversation, true, c.bos, c.eos),
              c.rendered + c.gen_suffix);
  }
}

TEST(ChatTemplateTest, NeverStartsWithBos) {
  // The tokenizer adds BOS; writing it too would give two.
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    for (bool gen : {false, true}) {
      std::string out = Render(c.family, {{"user", "Hi"}}, gen, c.bos, c.eos);
      EXPECT_NE(out.substr(0, std::string_view(c.bos).size()), c.bos) << out;
    }
  }
}

TEST(ChatTemplateTest, StopStringEndsTheAssistantTurn) {
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> stops = ChatStopStrings(c.family);
    ASSERT_FALSE(stops.empty());
    std::string out = Render(c.family, {{"user", "Hi"}, {"assistant", "Yo"}},
                             false, "<s>", "</s>");
    size_t at = out.rfind("Yo");
    ASSERT_NE(at, std::string::npos) << out;
    std::string_view rest = std::string_view(out).substr(at + 2);
    if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);  // llama2
    EXPECT_EQ(rest.substr(0, stops[0].size()), stops[0]) << out;
  }
}

TEST(ChatTemplateTest, Llama2SystemOnlyAndUserOnly) {
  EXPECT_EQ(Render(ChatTemplateFamily::kLlama2, {{"user", "  Hi \n"}}, true),
            "[INST] Hi [/INST]");
  EXPECT_EQ(Render(ChatTemplateFamily::kLlama2, {{"system", "S"}}, true),
            "[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
  // An empty BOS piece (vocabulary without BOS) leaves just "[INST]".
  EXPECT_EQ(Render(ChatTemplateFamily::kLlama2,
                   {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, true,
                   "", "</s>"),
            "[INST] a [/INST] b </s>[INST] c [/INST]");
}

TEST(ChatTemplateTest, MistralFoldsSystemIntoNextUserMessage) {
  EXPECT_EQ(Render(ChatTemplateFamily::kMistral,
                   {{"system", "A"}, {"system", "B"}, {"user", "u"}}, true),
            "[INST] A\n\nB\n\nu [/INST]");
  // No user message follows: the system text becomes a user turn itself.
  EXPECT_EQ(Render(ChatTemplateFamily::kMistral,
                   {{"system", "S"}, {"assistant", "a"}}, false),
            "[INST] S [/INST]a</s>");
  EXPECT_EQ(Render(ChatTemplateFamily::kMistral, {{"system", "S"}}, true),
            "[INST] S [/INST]");
  // Mistral does not trim.
  EXPECT_EQ(Render(ChatTemplateFamily::kMistral, {{"user", " x "}}, true),
            "[INST]  x  [/INST]");
}

TEST(ChatTemplateTest, TrimmingFollowsTheReferenceTemplates) {
  const std::vector<ChatMessage> padded = {{"user", "\n Hi \t"}};
  EXPECT_EQ(Render(ChatTemplateFamily::kLlama3, padded, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(Render(ChatTemplateFamily::kGemma, padded, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(Render(ChatTemplateFamily::kChatml, padded, false),
            "<|im_start|>user\n\n Hi \t<|im_end|>\n");
  EXPECT_EQ(Render(ChatTemplateFamily::kPhi3, padded, false),
            "<|user|>\n\n Hi \t<|end|>\n");
  EXPECT_EQ(Render(ChatTemplateFamily::kGemma,
                   {{"system", "S"}, {"user", " u "}}, false),
            "<start_of_turn>user\nS\n\nu<end_of_turn>\n");
}

TEST(ChatTemplateTest, ZephyrUsesTheEosPieceGiven) {
  EXPECT_EQ(Render(ChatTemplateFamily::kZephyr, {{"user", "Hi"}}, true, "",
                   "<|endoftext|>"),
            "<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
}

TEST(ChatTemplateTest, RejectsEmptyListAndUnknownRole) {
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    StatusOr<std::string> empty = RenderChat(c.family, {}, true, "<s>", "</s>");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(empty.status().reason(), "empty_messages");

    const std::vector<ChatMessage> bad = {{"user", "Hi"}, {"tool", "42"}};
    StatusOr<std::string> role = RenderChat(c.family, bad, true, "<s>", "</s>");
    ASSERT_FALSE(role.ok());
    EXPECT_EQ(role.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(role.status().reason(), "unknown_role");
    EXPECT_NE(role.status().message().find("messages[1].role is \"tool\""),
              std::string_view::npos)
        << role.status();
  }
  // Roles are case-sensitive, as in the OpenAI API.
  const std::vector<ChatMessage> capital = {{"User", "x"}};
  EXPECT_FALSE(RenderChat(ChatTemplateFamily::kChatml, capital, true, "", "")
                   .ok());
}

TEST(ChatTemplateTest, ParsesEveryFamilyName) {
  for (const FamilyCase& c : AllFamilies()) {
    SCOPED_TRACE(c.name);
    StatusOr<ChatTemplateFamily> f = ParseChatTemplateName(c.name);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(*f, c.family);
    EXPECT_EQ(std::string(ChatTemplateFamilyName(c.family)), c.name);
  }
}

TEST(ChatTemplateTest, RejectsUnknownNameListingValidOnes) {
  for (const char* name : {"", "ChatML", "llama", "vicuna", "chatml "}) {
    SCOPED_TRACE(name);
    StatusOr<ChatTemplateFamily> f = ParseChatTemplateName(name);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().reason(), "unknown_chat_template");
    EXPECT_NE(f.status().message().find(
                  "chatml, llama2, llama3, mistral, zephyr, phi3, gemma"),
              std::string_view::npos)
        << f.status();
  }
}

// llama.cpp's built-in "command-r" format, as llama-server renders it
// for --chat-template command-r (its server suite's expectation).
TEST(ChatTemplateTest, CommandRByName) {
  auto family = ParseChatTemplateName("command-r");
  ASSERT_TRUE(family.ok()) << family.status();
  const std::vector<ChatMessage> messages = {{"system", "You are a test."},
                                             {"user", " Hi there"}};
  auto out = RenderChat(*family, messages, true, "<s>", "</s>");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test."
            "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi "
            "there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
  EXPECT_EQ(ChatStopStrings(*family),
            std::vector<std::string>{"<|END_OF_TURN_TOKEN|>"});
}

}  // namespace
}  // namespace kvault
