// JSON schema -> GBNF: for each schema, valid instances are sentences of
// the converted grammar and invalid ones are not; unsupported keywords are
// errors naming the keyword and where it is.
#include "grammar/json_schema_to_gbnf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/schema_rules.h"

namespace kvault {
namespace {

using ojson = nlohmann::ordered_json;

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

const std::vector<SchemaCase>& Cases() {
  static const std::vector<SchemaCase> kCases = {
      {"any", "{}", {"1", "\"x\"", "[1, {\"a\": null}]", "{}"}, {"", "[1,]"}},
      {"true", "true", {"null", "-0.5e3"}, {"nul"}},
      {"string",
       R"({"type":"string"})",
       {R"("")", R"("a\"b\\c\u00e9")", "\"日本\""},
       {"a", R"("a)", "\"\x01\"", "1"}},
      {"integer",
       R"({"type":"integer"})",
       {"0", "-12", "1234567890"},
       {"01", "1.5", "-", "\"1\"", "12345678901234567"}},
      {"number",
       R"({"type":"number"})",
       {"0", "-1.25", "3e10", "2.5E-3"},
       {"1.", ".5", "+1", "1e"}},
      {"boolean", R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {"null", R"({"type":"null"})", {"null"}, {"nil", "\"null\""}},
      {"type list",
       R"({"type":["string","null"]})",
       {"null", "\"s\""},
       {"1", "false"}},
      {"object required/optional in order",
       R"({"type":"object","properties":{"name":{"type":"string"},
           "age":{"type":"integer"},"tags":{"type":"array",
           "items":{"type":"string"}}},"required":["name"]})",
       {R"({"name":"a"})", R"({"name": "a", "age": 3})",
        R"({"name":"a","tags":["x","y"]})", R"({"name":"a","age":1,"tags":[]})",
        "{\n  \"name\": \"a\",\n  \"age\": 1\n}"},
       {R"({})", R"({"age":3})", R"({"age":3,"name":"a"})",
        R"({"name":"a","extra":1})", R"({"name":"a",})", R"({"name":1})",
        R"({"name":"a","tags":[1]})"}},
      {"all optional",
       R"({"properties":{"a":{"type":"integer"},
           "b":{"type":"integer"}}})",
       {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
       {R"({"b":2,"a":1})", R"({,"b":2})", R"({"a":1,})"}},
      {"additionalProperties schema",
       R"({"type":"object","properties":{"id":{"type":"integer"}},
           "required":["id"],"additionalProperties":{"type":"boolean"}})",
       {R"({"id":1})", R"({"id":1,"x":true,"y":false})"},
       {R"({"id":1,"x":1})", R"({"x":true})"}},
      {"open object",
       R"({"type":"object"})",
       {"{}", R"({"k":[1,{"z":null}]})"},
       {"[]", R"({"k"})"}},
      {"nested objects",
       R"({"type":"object","properties":{"user":{"type":"object",
           "properties":{"id":{"type":"integer"},"email":{"type":"string"}},
           "required":["id","email"]}},"required":["user"]})",
       {R"({"user":{"id":1,"email":"e"}})"},
       {R"({"user":{"id":1}})", R"({"user":{"email":"e","id":1}})"}},
      {"enum",
       R"({"enum":["red","green",1,null,{"a":[true]}]})",
       {R"("red")", R"("green")", "1", "null", R"({"a":[true]})"},
       {R"("blue")", "2", R"("Red")"}},
      {"enum filtered by type",
       R"({"type":"string","enum":["a",1]})",
       {R"("a")"},
       {"1"}},
      {"const", R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"}},
      {"array min/max",
       R"({"type":"array","items":{"type":"integer"},
           "minItems":2,"maxItems":3})",
       {"[1,2]", "[1, 2, 3]"},
       {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"}},
      {"array max only",
       R"({"type":"array","maxItems":1})",
       {"[]", "[{}]"},
       {"[1,2]"}},
      {"prefixItems",
       R"({"type":"array","prefixItems":[{"type":"string"},
           {"type":"integer"}]})",
       {R"(["a",1])"},
       {R"(["a"])", R"([1,"a"])", R"(["a",1,2])"}},
      {"prefixItems + items",
       R"({"type":"array","prefixItems":[
           {"type":"string"}],"items":{"type":"boolean"},"maxItems":3})",
       {R"(["a"])", R"(["a",true,false])"},
       {R"(["a",true,false,true])", R"(["a",1])"}},
      {"string lengths",
       R"({"type":"string","minLength":2,"maxLength":4})",
       {R"("ab")", R"("abcd")", R"("日本")", R"("a\nb")"},
       {R"("a")", R"("abcde")"}},
      {"formats",
       R"({"type":"object","properties":{
           "d":{"type":"string","format":"date"},
           "t":{"type":"string","format":"time"},
           "dt":{"type":"string","format":"date-time"},
           "u":{"type":"string","format":"uuid"}},"required":["d","t","dt","u"]})",
       {R"({"d":"2024-02-29","t":"13:45:00Z","dt":"2024-01-01T00:00:00.123+02:00",)"
        R"("u":"123e4567-e89b-12d3-a456-426614174000"})"},
       {R"({"d":"2024-13-01","t":"13:45:00Z","dt":"2024-01-01T00:00:00Z",)"
        R"("u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"d":"2024-01-01","t":"25:00:00Z","dt":"2024-01-01T00:00:00Z",)"
        R"("u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"d":"2024-01-01","t":"10:00:00Z","dt":"2024-01-01 00:00:00Z",)"
        R"("u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"d":"2024-01-01","t":"10:00:00Z","dt":"2024-01-01T00:00:00Z",)"
        R"("u":"123e4567e89b12d3a456426614174000"})"}},
      {"integer range",
       R"({"type":"integer","minimum":-15,"maximum":123})",
       {"-15", "-1", "0", "9", "10", "99", "100", "123"},
       {"-16", "124", "200", "-0", "1000"}},
      {"integer exclusive",
       R"({"type":"integer","exclusiveMinimum":0,
           "exclusiveMaximum":10})",
       {"1", "9"},
       {"0", "10"}},
      {"integer minimum only",
       R"({"type":"integer","minimum":100})",
       {"100", "999", "1000000"},
       {"99", "-5", "0"}},
      {"anyOf",
       R"({"anyOf":[{"type":"integer"},{"type":"object",
           "properties":{"x":{"type":"string"}},"required":["x"]}]})",
       {"5", R"({"x":"s"})"},
       {"\"s\"", "{}"}},
      {"oneOf",
       R"({"oneOf":[{"const":1},{"const":"one"}]})",
       {"1", R"("one")"},
       {"2"}},
      {"allOf merge",
       R"({"allOf":[{"type":"object","properties":{
           "a":{"type":"integer"}},"required":["a"]},{"properties":{
           "b":{"type":"string"}},"required":["b"]}]})",
       {R"({"a":1,"b":"x"})"},
       {R"({"a":1})", R"({"b":"x","a":1})"}},
      {"$defs ref",
       R"({"$defs":{"pt":{"type":"object","properties":{
           "x":{"type":"integer"},"y":{"type":"integer"}},
           "required":["x","y"]}},"type":"array",
           "items":{"$ref":"#/$defs/pt"}})",
       {R"([{"x":1,"y":2},{"x":3,"y":4}])", "[]"},
       {R"([{"x":1}])"}},
      {"recursive definitions",
       R"({"definitions":{"node":{"type":"object",
           "properties":{"v":{"type":"integer"},"kids":{"type":"array",
           "items":{"$ref":"#/definitions/node"}}},"required":["v"]}},
           "$ref":"#/definitions/node"})",
       {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]})"},
       {R"({"v":1,"kids":[{}]})"}},
      {"key escaping",
       R"({"type":"object","properties":{"a\"b/c":{
           "type":"null"}},"required":["a\"b/c"]})",
       {R"({"a\"b/c":null})"},
       {R"({"ab/c":null})"}},
  };
  return kCases;
}

TEST(JsonSchemaToGbnfTest, ValidInstancesAcceptedInvalidRejected) {
  ASSERT_GE(Cases().size(), 20u);
  for (const SchemaCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    StatusOr<std::string> gbnf = JsonSchemaToGbnf(ojson::parse(c.schema));
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    StatusOr<Grammar> g = Grammar::Parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
    for (const std::string& s : c.accept) {
      EXPECT_TRUE(g->Accepts(s)) << "should accept " << s << "\n" << *gbnf;
    }
    for (const std::string& s : c.reject) {
      EXPECT_FALSE(g->Accepts(s)) << "should reject " << s << "\n" << *gbnf;
    }
  }
}

TEST(JsonSchemaToGbnfTest, PropertyOrderFollowsTheSchema) {
  const char* schema = R"({"properties":{"z":{"type":"integer"},
      "a":{"type":"integer"}},"required":["z","a"]})";
  StatusOr<Grammar> ordered =
      Grammar::Parse(*JsonSchemaToGbnf(ojson::parse(schema)));
  ASSERT_TRUE(ordered.ok());
  EXPECT_TRUE(ordered->Accepts(R"({"z":1,"a":2})"));
  EXPECT_FALSE(ordered->Accepts(R"({"a":2,"z":1})"));
  // nlohmann::json sorts keys, so the order is alphabetical.
  StatusOr<Grammar> sorted =
      Grammar::Parse(*JsonSchemaToGbnf(nlohmann::json::parse(schema)));
  ASSERT_TRUE(sorted.ok());
  EXPECT_TRUE(sorted->Accepts(R"({"a":2,"z":1})"));
}

TEST(JsonSchemaToGbnfTest, WhitespaceIsBounded) {
  StatusOr<Grammar> g = Grammar::Parse(*JsonSchemaToGbnf(
      ojson::parse(R"({"type":"array","items":{"type":"integer"}})")));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Accepts("[\n  1,\n  2\n]"));
  EXPECT_TRUE(g->Accepts("[1, 2]"));
  EXPECT_FALSE(g->Accepts("[1,  2]"));
  EXPECT_FALSE(g->Accepts("[1,\n\n\n2]"));
  EXPECT_FALSE(g->Accepts(" [1]"));
}

std::string ErrorOf(const char* schema) {
  StatusOr<std::string> r = JsonSchemaToGbnf(ojson::parse(schema));
  if (r.ok()) return "OK";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(JsonSchemaToGbnfTest, UnsupportedKeywordsAreNamedWithTheirPath) {
  EXPECT_EQ(ErrorOf(R"({"properties":{"a":{"patternProperties":{}}}})"),
            "keyword 'patternProperties' at /properties/a is not supported");
  EXPECT_EQ(ErrorOf(R"({"type":"number","multipleOf":2})"),
            "keyword 'multipleOf' at / is not supported");
  EXPECT_EQ(ErrorOf(R"({"type":"string","pattern":"a+"})"),
            "keyword 'pattern' at / is not supported: only patterns anchored "
            "with '^' and '$' are supported");
  EXPECT_EQ(ErrorOf(R"({"type":"number","minimum":0})"),
            "keyword 'minimum' at / is not supported: bounds are supported "
            "on type 'integer' only");
  EXPECT_EQ(ErrorOf(R"({"type":"array","uniqueItems":true})"),
            "keyword 'uniqueItems' at / is not supported: only false is");
  EXPECT_EQ(ErrorOf(R"({"items":{"not":{}}})"),
            "keyword 'not' at /items is not supported");
  EXPECT_EQ(ErrorOf(R"({"anyOf":[{}],"type":"object"})"),
            "keyword 'type' at / is not supported: next to 'anyOf'");
  EXPECT_EQ(ErrorOf(R"({"type":"string","format":"email"})"),
            "format 'email' at / is not supported (supported: date, time, "
            "date-time, uuid)");
  EXPECT_EQ(ErrorOf(R"({"type":"string","maxLength":100000})"),
            "keyword 'maxLength' at / is not supported: the value 100000 "
            "exceeds the limit of 10000");
  StatusOr<std::string> r =
      JsonSchemaToGbnf(ojson::parse(R"({"dependentRequired":{}})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().WithContext("field 'json_schema'").message(),
            "field 'json_schema': keyword 'dependentRequired' at / is not "
            "supported");
  EXPECT_EQ(r.status().reason(), "unsupported_schema");
}

TEST(JsonSchemaToGbnfTest, InvalidSchemasAreErrors) {
  EXPECT_EQ(ErrorOf("false"), "schema 'false' at / matches nothing");
  EXPECT_EQ(ErrorOf("3"),
            "schema at / must be an object or a boolean, got "
            "number");
  EXPECT_EQ(ErrorOf(R"({"type":"decimal"})"), "unknown type 'decimal' at /");
  EXPECT_EQ(ErrorOf(R"({"$ref":"#/$defs/missing"})"),
            "$ref '#/$defs/missing' at / does not resolve");
  EXPECT_EQ(ErrorOf(R"({"$ref":"https://x/schema.json"})"),
            "$ref 'https://x/schema.json' at / is not supported: only local "
            "references ('#/$defs/name') are");
  EXPECT_EQ(ErrorOf(R"({"type":"integer","minimum":5,"maximum":1})"),
            "integer at / allows no value (minimum above maximum)");
  EXPECT_EQ(ErrorOf(R"({"type":"array","minItems":3,"maxItems":2})"),
            "array at / allows no length (minItems/maxItems/prefixItems "
            "conflict)");
  const std::string loop = ErrorOf(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},
                                       "$ref":"#/$defs/a"})");
  EXPECT_NE(loop.find("left-recursive"), std::string::npos) << loop;
}

struct PatternCase {
  const char* pattern;
  std::vector<std::string> accept;  // string contents as JSON text
  std::vector<std::string> reject;
};

TEST(JsonSchemaToGbnfTest, Patterns) {
  const std::vector<PatternCase> cases = {
      {R"(^[A-Z]{2}-\d{3}$)", {"AB-123"}, {"AB-12", "ab-123", "AB-1234"}},
      {R"(^(abc|de)+x?$)", {"abc", "deabcx", "dede"}, {"", "abx x", "ab"}},
      {R"(^\w+@\w+\.com$)", {"joe_1@site.com"}, {"joe@site.org", "@a.com"}},
      {R"(^[^a-c]*$)", {"", "xyz", "\\\"\\n"}, {"xa", "b"}},
      {R"(^a.c$)", {"abc", "a\\\"c", "a日c"}, {"ac", "abbc"}},
      // A quote and a backslash in the pattern are escapes in the JSON text.
      {R"(^"q"\\\s$)",
       {"\\\"q\\\"\\\\ ", "\\\"q\\\"\\\\\\t"},
       {"\"q\"\\\\ ", "\\\"q\\\"\\\\"}},
      {R"(^(?:0|[1-9]\d*)(?<frac>\.\d+)?$)", {"0", "10.5"}, {"01", "1."}},
      {R"(^x{2,}?y{0,2}$)", {"xx", "xxxyy"}, {"x", "xxyyy"}},
      {R"(^[\-+.]$)", {"-", "+", "."}, {"a", ","}},
  };
  for (const PatternCase& c : cases) {
    SCOPED_TRACE(c.pattern);
    ojson schema = {{"type", "string"}, {"pattern", c.pattern}};
    StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    StatusOr<Grammar> g = Grammar::Parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
    for (const std::string& s : c.accept) {
      EXPECT_TRUE(g->Accepts("\"" + s + "\"")) << s << "\n" << *gbnf;
    }
    for (const std::string& s : c.reject) {
      EXPECT_FALSE(g->Accepts("\"" + s + "\"")) << s << "\n" << *gbnf;
    }
  }
  EXPECT_EQ(ErrorOf(R"({"type":"string","pattern":"^(?=a)a$"})"),
            "keyword 'pattern' at / is not supported: lookaround and other "
            "(?...) groups are not supported at offset 2 of the pattern");
  EXPECT_EQ(ErrorOf(R"({"type":"string","pattern":"^(a)\\1$"})"),
            "keyword 'pattern' at / is not supported: escape '\\1' (word "
            "boundaries, backreferences, ...) is not supported at offset 6 "
            "of the pattern");
  EXPECT_EQ(ErrorOf(R"({"type":"string","pattern":"^a{1,20000}$"})"),
            "keyword 'pattern' at / is not supported: repetition count above "
            "10000 at offset 11 of the pattern");
  EXPECT_EQ(ErrorOf(R"({"type":"string","pattern":"^a)$"})"),
            "keyword 'pattern' at / is not supported: unmatched ')' at offset "
            "2 of the pattern");
}

TEST(JsonSchemaToGbnfTest, JsonObjectMode) {
  StatusOr<Grammar> g = Grammar::Parse(JsonObjectGbnf());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Accepts(R"({"a": [1, "b", null], "c": {}})"));
  EXPECT_FALSE(g->Accepts("[1]"));
  EXPECT_FALSE(g->Accepts("\"s\""));
}

TEST(IntegerRangeExprTest, MatchesExactlyTheRange) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0},     {0, 9},    {3, 7},        {-7, -3},  {-120, 5},
      {5, 10000}, {99, 101}, {-1000, -999}, {17, 1234}};
  for (auto [lo, hi] : ranges) {
    SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
    StatusOr<Grammar> g =
        Grammar::Parse("root ::= " + IntegerRangeExpr(lo, hi) + "\n");
    ASSERT_TRUE(g.ok()) << g.status();
    for (int64_t v = -1200; v <= 10100; ++v) {
      ASSERT_EQ(g->Accepts(std::to_string(v)), v >= lo && v <= hi) << v;
    }
    EXPECT_FALSE(g->Accepts("-0"));
    EXPECT_FALSE(g->Accepts("007"));
  }
}

}  // namespace
}  // namespace kvault
