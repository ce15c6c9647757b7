#include "server/chat_format.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

using nlohmann::ordered_json;

const std::vector<ChatMessage> kHi = {{"user", "hi"}};
const ordered_json kHiJson =
    ordered_json::array({{{"role", "user"}, {"content", "hi"}}});

TEST(ChatFormatTest, JinjaSeesMessagesAndVariables) {
  auto f = ChatFormat::FromJinja(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}"
      "{% endfor %}{{ greeting }}{% if add_generation_prompt %}>{% endif %}");
  ASSERT_TRUE(f.ok()) << f.status();
  f->default_kwargs = {{"greeting", "[server]"}};
  auto out = f->Render(kHiJson, kHi, true, "<s>", "</s>", ordered_json());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s>user:hi[server]>");
  out = f->Render(kHiJson, kHi, false, "<s>", "</s>",
                  ordered_json{{"greeting", "[request]"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s>user:hi[request]");
  EXPECT_TRUE(f->StopStrings().empty());
}

TEST(ChatFormatTest, TemplateErrorsSayWhere) {
  auto bad = ChatFormat::FromJinja("{% if x %}unclosed");
  EXPECT_NE(bad.status().message().find("template:1:"), std::string::npos)
      << bad.status();
  auto raising = ChatFormat::FromJinja("{{ raise_exception('no') }}");
  ASSERT_TRUE(raising.ok());
  auto out = raising->Render(kHiJson, kHi, true, "", "", ordered_json());
  EXPECT_EQ(out.status().reason(), "template_error");
}

// A built-in family cannot render variables: refused by name, never
// dropped.
TEST(ChatFormatTest, BuiltInFamiliesRefuseVariables) {
  ChatFormat chatml(ChatTemplateFamily::kChatml);
  EXPECT_TRUE(chatml.Render(kHiJson, kHi, true, "", "", ordered_json()).ok());
  auto tools = chatml.Render(kHiJson, kHi, true, "", "",
                             ordered_json{{"tools", ordered_json::array()}});
  EXPECT_NE(tools.status().message().find("'tools'"), std::string::npos);
  auto vars = chatml.Render(kHiJson, kHi, true, "", "",
                            ordered_json{{"enable_thinking", false}});
  EXPECT_NE(vars.status().message().find("'chat_template_kwargs'"),
            std::string::npos);
  chatml.default_kwargs = {{"enable_thinking", false}};
  auto flag = chatml.Render(kHiJson, kHi, true, "", "", ordered_json());
  EXPECT_NE(flag.status().message().find("--chat-template-kwargs"),
            std::string::npos);
}

}  // namespace
}  // namespace kvault

namespace kvault {
namespace {

TEST(ChatFormatCapsTest, CapsFollowTheTemplateSource) {
  auto hermes = ChatFormat::FromJinja(
      "{% for m in messages %}{{ m.role }}{% if m.tool_calls %}{% for c in "
      "m.tool_calls %}<tool_call>{{ c | tojson }}</tool_call>{% endfor %}"
      "{% endif %}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}");
  ASSERT_TRUE(hermes.ok()) << hermes.status();
  const nlohmann::json caps = hermes->CapsJson();
  EXPECT_EQ(caps["supports_tools"], true);
  EXPECT_EQ(caps["supports_tool_calls"], true);
  EXPECT_EQ(caps["supports_reasoning"], false);
  EXPECT_EQ(caps["tool_call_format"], "hermes");
  const nlohmann::json builtin = ChatFormat().CapsJson();
  EXPECT_EQ(builtin["supports_tools"], false);
  EXPECT_EQ(builtin["supports_system_role"], true);
  EXPECT_EQ(builtin["tool_call_format"], "content-only");
}

}  // namespace
}  // namespace kvault
