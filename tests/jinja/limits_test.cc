// Hostile templates: every one must fail with a precise error (kLimit or a
// syntax error) quickly instead of hanging, exhausting memory or crashing.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <string>

#include "core/sanitizers.h"
#include "jinja/error.h"
#include "jinja/template.h"
#include "jinja_test_util.h"

namespace kvault::jinja {
namespace {

ErrorKind KindOf(std::string_view source,
                 const RenderOptions& options = FixedClockOptions()) {
  StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return ErrorKindOf(t.status());
  StatusOr<std::string> out =
      t->Render(nlohmann::ordered_json::object(), options);
  return out.ok() ? ErrorKind::kNone : ErrorKindOf(out.status());
}

struct HostileCase {
  const char* what;
  const char* source;
};

TEST(JinjaLimitsTest, HostileTemplatesHitALimit) {
  const HostileCase kCases[] = {
      {"huge range", "{% for i in range(10**9) %}{% endfor %}"},
      {"huge string", "{{ 'x' * 10**12 }}"},
      {"huge list", "{{ ([1] * 10**12)|length }}"},
      {"recursive macro", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"},
      {"nested loops",
       "{% for i in range(100000) %}{% for j in range(100000) %}"
       "{% endfor %}{% endfor %}"},
      {"doubling string",
       "{% set ns = namespace(s='a') %}{% for i in range(64) %}"
       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"},
      {"deep value",
       "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
       "{% set ns.x = [ns.x] %}{% endfor %}"},
      {"repr explosion",
       "{% set a = [1]*1000 %}{% set b = [a]*1000 %}{% set c = [b]*1000 %}"
       "{{ c }}"},
      {"tojson explosion",
       "{% set a = [1]*1000 %}{% set b = [a]*1000 %}{% set c = [b]*1000 %}"
       "{{ c|tojson }}"},
      {"huge padding", "{{ 'x'.center(10**12) }}"},
      {"huge batch fill", "{{ [1]|batch(10**12, 0)|list }}"},
      {"huge slice count", "{{ range(10)|slice(10**9)|list }}"},
  };
  for (const HostileCase& c : kCases) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(KindOf(c.source), ErrorKind::kLimit) << c.what;
    const auto took = std::chrono::steady_clock::now() - start;
    // Generous: sanitizer builds run about ten times slower.
    EXPECT_LT(took, std::chrono::seconds(60)) << c.what;
  }
}

// Regression (issue 40): a split into 8M pieces built them all (1.24 GB)
// before anything was charged. Pieces are now bounded by the item limit
// before they are built.
TEST(JinjaLimitsTest, SplitsAreBoundedByTheItemLimit) {
  EXPECT_EQ(KindOf("{{ (',' * 8000000).split(',')|length }}"),
            ErrorKind::kLimit);
  EXPECT_EQ(KindOf("{{ ('x\\n' * 8000000).splitlines()|length }}"),
            ErrorKind::kLimit);
  RenderOptions options = FixedClockOptions();
  options.max_items = 1000;
  EXPECT_EQ(KindOf("{{ ('a,' * 2000).split(',')|length }}", options),
            ErrorKind::kLimit);
  EXPECT_EQ(KindOf("{{ ('a,' * 2000).split(',', 5)|length }}", options),
            ErrorKind::kNone);
  EXPECT_EQ(KindOf("{{ [1] * 2000 }}", options), ErrorKind::kLimit);
  auto t = Template::Parse("{{ ('a,' * 500).split(',')|length }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render(nlohmann::ordered_json::object(), options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "501");
}

TEST(JinjaLimitsTest, OutputLimitIsAnOption) {
  RenderOptions options = FixedClockOptions();
  options.max_output_bytes = 1000;
  EXPECT_EQ(KindOf("{% for i in range(200) %}xxxxxxxx{% endfor %}", options),
            ErrorKind::kLimit);
  EXPECT_EQ(KindOf("{% for i in range(100) %}xxxxxxxx{% endfor %}", options),
            ErrorKind::kNone);
}

TEST(JinjaLimitsTest, OperationBudgetIsAnOption) {
  RenderOptions options = FixedClockOptions();
  options.max_operations = 1000;
  EXPECT_EQ(KindOf("{% for i in range(2000) %}{% endfor %}", options),
            ErrorKind::kLimit);
  EXPECT_EQ(KindOf("{% for i in range(10) %}{{ i }}{% endfor %}", options),
            ErrorKind::kNone);
}

TEST(JinjaLimitsTest, DepthLimitBoundsRecursionAndNesting) {
  RenderOptions options = FixedClockOptions();
  options.max_depth = 64;
  EXPECT_EQ(KindOf("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}"
                   "{% endmacro %}{{ f(5) }}",
                   options),
            ErrorKind::kNone);
  EXPECT_EQ(KindOf("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}"
                   "{% endmacro %}{{ f(1000) }}",
                   options),
            ErrorKind::kLimit);
  // Deeply nested source is refused by the parser, not by the stack.
  const std::string parens =
      "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_EQ(KindOf(parens), ErrorKind::kSyntax);
  const std::string lists =
      "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_EQ(KindOf(lists), ErrorKind::kSyntax);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if 1 %}";
  EXPECT_EQ(KindOf(ifs), ErrorKind::kSyntax);
}

TEST(JinjaLimitsTest, LongOperatorChainsDoNotOverflowTheStack) {
  // `1+1+...` parses as a left-leaning tree as deep as the input is long.
  std::string chain = "{{ 1";
  for (int i = 0; i < 200000; ++i) chain += "+1";
  chain += " }}";
  EXPECT_EQ(KindOf(chain), ErrorKind::kLimit);
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 200000; ++i) filters += "|upper";
  filters += " }}";
  EXPECT_EQ(KindOf(filters), ErrorKind::kLimit);
}

TEST(JinjaLimitsTest, DefaultDepthFitsInASmallThreadStack) {
  // Server threads may have small stacks: recursion up to the default depth
  // limit must fit in 2 MiB (sanitizer builds need more; they run on the
  // main thread's 8 MiB).
  std::string out;
  auto run = [&out] {
    out = RenderOrError(
        "{% macro f(n) %}{% if n %}({{ f(n - 1) }}){% endif %}{% endmacro %}"
        "{{ f(10000) }}|{{ ((((((((((((((((1)))))))))))))))) }}");
  };
#if KVAULT_ADDRESS_SANITIZER
  run();
#else
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{2} << 20);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* fn) -> void* {
                  (*static_cast<decltype(run)*>(fn))();
                  return nullptr;
                },
                &run),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
#endif
  EXPECT_EQ(out, "error:LimitExceeded");
}

TEST(JinjaLimitsTest, SourceSizeLimit) {
  ParseOptions options;
  options.max_source_bytes = 100;
  StatusOr<Template> t = Template::Parse(std::string(101, 'x'), options);
  EXPECT_EQ(ErrorKindOf(t.status()), ErrorKind::kLimit);
}

TEST(JinjaLimitsTest, SelfReferenceRendersFinitely) {
  EXPECT_EQ(RenderOrError("{% set ns = namespace() %}{% set ns.x = ns %}"
                          "{{ ns }}"),
            "<Namespace {'x': <Namespace {...}>}>");
}

TEST(JinjaLimitsTest, IntegerOverflowIsAnErrorNotWraparound) {
  EXPECT_EQ(KindOf("{{ 2 ** 100 }}"), ErrorKind::kValue);
  EXPECT_EQ(KindOf("{{ 9223372036854775807 + 1 }}"), ErrorKind::kValue);
  EXPECT_EQ(KindOf("{{ 99999999999999999999 }}"), ErrorKind::kSyntax);
}

}  // namespace
}  // namespace kvault::jinja
