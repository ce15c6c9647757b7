// The public API: parse once, render many times with different contexts,
// the injectable clock, and contexts given as JSON or as Values.
#include "jinja/template.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "jinja/strftime.h"
#include "jinja_test_util.h"

namespace kvault::jinja {
namespace {

TEST(JinjaTemplateTest, ClockIsInjected) {
  StatusOr<Template> t =
      Template::Parse("{{ strftime_now('%d %b %Y, %A %H:%M') }}");
  ASSERT_TRUE(t.ok());
  RenderOptions options;
  std::tm now{};
  ASSERT_TRUE(ParseIsoDateTime("2024-02-29T23:05:00", &now));
  options.now = [now] { return now; };
  EXPECT_EQ(*t->Render(nlohmann::ordered_json::object(), options),
            "29 Feb 2024, Thursday 23:05");
  // Without a clock the system clock is used: still a well-formed date.
  StatusOr<std::string> system = t->Render(nlohmann::ordered_json::object());
  ASSERT_TRUE(system.ok());
  EXPECT_NE(system->find(", "), std::string::npos) << *system;
}

TEST(JinjaTemplateTest, StrftimeDirectives) {
  std::tm tm{};
  ASSERT_TRUE(ParseIsoDateTime("2026-01-15T09:30:00", &tm));
  // Python: datetime(2026, 1, 15, 9, 30).strftime(...)
  EXPECT_EQ(Strftime("%Y-%m-%d %H:%M:%S", tm), "2026-01-15 09:30:00");
  EXPECT_EQ(Strftime("%a %A %b %B %y %j %p %I %e %%", tm),
            "Thu Thursday Jan January 26 015 AM 09 15 %");
  EXPECT_EQ(Strftime("%-d/%-m", tm), "15/1");
  EXPECT_FALSE(ParseIsoDateTime("2026-13-01T00:00:00", &tm));
  EXPECT_FALSE(ParseIsoDateTime("yesterday", &tm));
}

TEST(JinjaTemplateTest, JsonContextKeepsKeyOrder) {
  StatusOr<Template> t = Template::Parse("{{ d }}|{{ d|tojson }}");
  ASSERT_TRUE(t.ok());
  const auto ctx = nlohmann::ordered_json::parse(
      R"({"d": {"zeta": 1, "alpha": [true, null, 2.5]}})");
  EXPECT_EQ(*t->Render(ctx),
            "{'zeta': 1, 'alpha': [True, None, 2.5]}|"
            "{\"zeta\": 1, \"alpha\": [true, null, 2.5]}");
}

TEST(JinjaTemplateTest, ValueContextAndReuseAcrossThreads) {
  StatusOr<Template> t = Template::Parse(
      "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(t.ok());
  const Template shared = *t;  // copies share the parsed tree
  std::vector<std::thread> threads;
  std::vector<std::string> outs(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&shared, &outs, i] {
      ValueMap message;
      message.Set("role", Value::String("user"));
      message.Set("content", Value::String(std::to_string(i)));
      ValueMap ctx;
      ctx.Set("messages", Value::List({Value::Dict(message)}));
      StatusOr<std::string> out = shared.Render(ctx);
      outs[i] = out.ok() ? *out : "error";
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(outs[i], "user:" + std::to_string(i) + ";");
  }
}

TEST(JinjaTemplateTest, ParseOptionsControlWhitespace) {
  ParseOptions plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  plain.keep_trailing_newline = true;
  StatusOr<Template> t =
      Template::Parse("  {% if 1 %}\nx\n{% endif %}\n", plain);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(nlohmann::ordered_json::object()), "  \nx\n\n");
  EXPECT_EQ(RenderOrError("  {% if 1 %}\nx\n{% endif %}\n"), "x\n");
}

}  // namespace
}  // namespace kvault::jinja
