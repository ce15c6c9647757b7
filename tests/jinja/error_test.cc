// Errors: syntax errors carry line and column, render errors carry the
// jinja2 exception class, and the Status code/reason tell kinds apart.
#include "jinja/error.h"

#include <gtest/gtest.h>

#include <string>

#include "jinja/template.h"
#include "jinja_test_util.h"

namespace kvault::jinja {
namespace {

Status ParseError(std::string_view source) {
  StatusOr<Template> t = Template::Parse(source);
  return t.ok() ? Status::Ok() : t.status();
}

Status RenderError(std::string_view source, std::string_view context = "{}") {
  StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  StatusOr<std::string> out =
      t->Render(nlohmann::ordered_json::parse(context), FixedClockOptions());
  return out.ok() ? Status::Ok() : out.status();
}

TEST(JinjaErrorTest, MismatchedEndTagNamesBothTagsAndPosition) {
  const Status s = ParseError(
      "line one\n{% if x %}\n  {% for y in z %}\n"
      "  {% endfor %}\n    {% endfor %}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kSyntax);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), "jinja_syntax_error");
  EXPECT_EQ(s.message(),
            "template:5:8: expected 'elif' or 'else' or 'endif', found "
            "'endfor'");
}

TEST(JinjaErrorTest, UnclosedBlockReportsWhatWasExpected) {
  const Status s = ParseError("{% for x in y %}\n{{ x }}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kSyntax);
  EXPECT_NE(s.message().find("expected 'endfor' or 'else'"),
            std::string_view::npos)
      << s;
  EXPECT_TRUE(s.message().starts_with("template:2:")) << s;
}

TEST(JinjaErrorTest, BadExpressionTokenHasColumn) {
  const Status s = ParseError("ab\ncd {{ 1 + }} ef");
  EXPECT_EQ(s.message(),
            "template:2:11: expected an expression, found end of print "
            "statement");
  EXPECT_EQ(ParseError("{{ a @ b }}").message(),
            "template:1:6: unexpected char '@'");
  EXPECT_EQ(ErrorKindOf(ParseError("{# open")), ErrorKind::kSyntax);
  EXPECT_EQ(ErrorKindOf(ParseError("{{ 'open }}")), ErrorKind::kSyntax);
  EXPECT_EQ(ErrorKindOf(ParseError("{% break %}")), ErrorKind::kSyntax);
  EXPECT_EQ(ErrorKindOf(ParseError("{% frobnicate %}")), ErrorKind::kSyntax);
}

TEST(JinjaErrorTest, RaiseExceptionIsTemplateErrorWithMessage) {
  const Status s = RenderError(
      "ok\n{% if true %}{{ raise_exception('Tool call IDs are bad!') }}"
      "{% endif %}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kTemplate);
  EXPECT_EQ(s.reason(), "jinja_template_error");
  EXPECT_EQ(s.message(),
            "template:2:17: TemplateError: Tool call IDs are bad!");
}

TEST(JinjaErrorTest, UndefinedErrorsNameTheMissingThing) {
  Status s = RenderError("{{ missing.attr }}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kUndefined);
  EXPECT_NE(s.message().find("UndefinedError: 'missing' is undefined"),
            std::string_view::npos)
      << s;
  s = RenderError("{{ d.k.z }}", R"({"d": {}})");
  EXPECT_NE(s.message().find("'dict object' has no attribute 'k'"),
            std::string_view::npos)
      << s;
  s = RenderError("{{ u + 1 }}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kUndefined);
}

TEST(JinjaErrorTest, TypeErrorsUsePythonMessages) {
  Status s = RenderError("{{ 'a' + m }}", R"({"m": [1]})");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kType);
  EXPECT_NE(s.message().find("can only concatenate str (not \"list\") to str"),
            std::string_view::npos)
      << s;
  s = RenderError("{{ x|tojson }}");
  EXPECT_NE(s.message().find("Object of type Undefined is not JSON "
                             "serializable"),
            std::string_view::npos)
      << s;
  s = RenderError("{{ [1]|map('string')|tojson }}");
  EXPECT_NE(s.message().find("Object of type generator"),
            std::string_view::npos)
      << s;
}

TEST(JinjaErrorTest, MutatingMethodsRaiseSecurityError) {
  const Status s = RenderError("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_EQ(ErrorKindOf(s), ErrorKind::kSecurity);
  EXPECT_NE(s.message().find(
                "access to attribute 'append' of 'list' object is unsafe."),
            std::string_view::npos)
      << s;
  // Looking it up without calling is harmless (an Undefined).
  EXPECT_EQ(RenderOrError("[{{ [1].append }}][{{ {}.update is defined }}]"),
            "[][False]");
}

TEST(JinjaErrorTest, NonJinjaStatusHasNoKind) {
  EXPECT_EQ(ErrorKindOf(Status::Ok()), ErrorKind::kNone);
  EXPECT_EQ(ErrorKindOf(InvalidArgumentError("x")), ErrorKind::kNone);
  EXPECT_EQ(WithPosition(InvalidArgumentError("x"), {3, 4}).message(), "x");
}

TEST(JinjaErrorTest, RenderRejectsNonObjectContext) {
  StatusOr<Template> t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  StatusOr<std::string> out = t->Render(nlohmann::ordered_json::array());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvault::jinja
