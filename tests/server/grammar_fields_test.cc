#include "server/grammar_fields.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "grammar/grammar_matcher.h"

namespace kvault {
namespace {

using nlohmann::json;

TEST(GrammarFieldsTest, GrammarSchemaAndResponseFormat) {
  SamplingParams s;
  ASSERT_TRUE(ReadGrammarFields(json{{"grammar", "root ::= \"a\"{5}"}}, &s).ok());
  ASSERT_NE(s.grammar, nullptr);
  EXPECT_TRUE(s.grammar->Accepts("aaaaa"));
  EXPECT_FALSE(s.grammar->Accepts("aaaa"));

  SamplingParams j;
  ASSERT_TRUE(ReadGrammarFields(json{{"json_schema", {{"const", "42"}}}}, &j).ok());
  ASSERT_NE(j.grammar, nullptr);
  EXPECT_TRUE(j.grammar->Accepts("\"42\""));
  EXPECT_FALSE(j.grammar->Accepts("42"));

  SamplingParams o;
  ASSERT_TRUE(ReadGrammarFields(
                  json{{"response_format", {{"type", "json_object"}}}}, &o)
                  .ok());
  ASSERT_NE(o.grammar, nullptr);
  EXPECT_TRUE(o.grammar->Accepts("{\"a\": [1, true]}"));
  EXPECT_FALSE(o.grammar->Accepts("\"just a string\""));

  SamplingParams js;
  ASSERT_TRUE(ReadGrammarFields(
                  json{{"response_format",
                        {{"type", "json_schema"},
                         {"json_schema",
                          {{"schema", {{"enum", json::array({"x", "y"})}}}}}}}},
                  &js)
                  .ok());
  EXPECT_TRUE(js.grammar->Accepts("\"y\""));
  EXPECT_FALSE(js.grammar->Accepts("\"z\""));

  SamplingParams text;
  ASSERT_TRUE(
      ReadGrammarFields(json{{"response_format", {{"type", "text"}}}}, &text)
          .ok());
  EXPECT_EQ(text.grammar, nullptr);
}

TEST(GrammarFieldsTest, ErrorsSayWhereAndWhy) {
  SamplingParams s;
  Status bad = ReadGrammarFields(
      json{{"grammar", "root ::= this is (not valid GBNF"}}, &s);
  EXPECT_EQ(bad.reason(), "invalid_grammar");
  EXPECT_NE(bad.message().find("field 'grammar': grammar:1:"),
            std::string::npos)
      << bad.message();
  Status both = ReadGrammarFields(
      json{{"grammar", "root ::= \"a\""}, {"json_schema", json::object()}}, &s);
  EXPECT_FALSE(both.ok());
  for (const json& format :
       {json{{"type", "sound"}}, json{{"type", "json_object"}, {"schema", 123}},
        json{{"type", "json_object"}, {"schema", {{"type", 123}}}},
        json{{"type", "json_object"}, {"schema", {{"type", "hiccup"}}}},
        json{{"type", "json_object"},
             {"schema", {{"patternProperties", json::object()}}}}}) {
    SamplingParams p;
    Status st = ReadGrammarFields(json{{"response_format", format}}, &p);
    EXPECT_FALSE(st.ok()) << format.dump();
    EXPECT_EQ(p.grammar, nullptr);
  }
}

// Regression (issue 40): big enums and alternations compiled slowly
// (quadratic) and then let the matcher give up at once (4,096 stacks), so
// the answer was an empty "success". Now they compile fast and hold; a
// grammar whose very start is past the matcher's bounds is refused with
// grammar_limit_exceeded.
TEST(GrammarFieldsTest, HugeEnumsCompileAndStartsPastTheLimitsAreRefused) {
  for (int n : {20000, 100000}) {
    json values = json::array();
    for (int i = 0; i < n; ++i) values.push_back("v" + std::to_string(i));
    SamplingParams p;
    const auto start = std::chrono::steady_clock::now();
    const Status st =
        ReadGrammarFields(json{{"json_schema", {{"enum", values}}}}, &p);
    const double s = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    std::printf("enum of %d values: compiled in %.3f s\n", n, s);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(p.grammar->Accepts("\"v" + std::to_string(n - 1) + "\""));
    EXPECT_FALSE(p.grammar->Accepts("\"v" + std::to_string(n) + "\""));
  }
  // Past the grammar's element cap (here a 400,000-value enum, about the
  // most an 8 MiB body holds): refused by name, in bounded time.
  {
    json values = json::array();
    for (int i = 0; i < 400000; ++i) values.push_back("v" + std::to_string(i));
    SamplingParams p;
    const auto start = std::chrono::steady_clock::now();
    const Status st =
        ReadGrammarFields(json{{"json_schema", {{"enum", values}}}}, &p);
    std::printf("enum of 400000 values: refused in %.3f s\n",
                std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count());
    EXPECT_EQ(st.reason(), "invalid_json_schema") << st;
    EXPECT_NE(st.message().find("grammar too large"), std::string::npos) << st;
  }
  // 5,000 optional properties (14.5 s when rule names were found by
  // counting up from 1 for each).
  json props = json::object();
  for (int i = 0; i < 5000; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  SamplingParams o;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(ReadGrammarFields(
                  json{{"json_schema", {{"type", "object"}, {"properties", props}}}},
                  &o)
                  .ok());
  std::printf("5000 optional properties: compiled in %.3f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count());
  // After "{" any of 5,000 keys may come, each a parse stack of its own:
  // past the matcher's 4,096, so generation stops with the limit's name
  // (the engine turns it into a grammar_limit_exceeded error).
  GrammarMatcher m(o.grammar);
  ASSERT_TRUE(m.status().ok()) << m.status();
  EXPECT_FALSE(m.AcceptBytes("{"));
  EXPECT_EQ(m.status().reason(), "grammar_limit_exceeded") << m.status();
  std::string gbnf = "root ::= ";
  for (int i = 0; i < 5000; ++i) {
    gbnf += (i ? " | \"alt" : "\"alt") + std::to_string(i) + "\"";
  }
  SamplingParams g;
  ASSERT_TRUE(ReadGrammarFields(json{{"grammar", gbnf}}, &g).ok());
  EXPECT_TRUE(g.grammar->Accepts("alt4999"));
  // 5,000 alternatives that differ in their first character's rule (so
  // nothing factors out) need 5,000 stacks at the start: refused by name.
  std::string wide = "root ::= ";
  for (int i = 0; i < 5000; ++i) {
    wide += (i ? " | r" : "r") + std::to_string(i);
  }
  for (int i = 0; i < 5000; ++i) {
    wide += "\nr" + std::to_string(i) + " ::= [a-z] \"" + std::to_string(i) +
            "\"";
  }
  SamplingParams w;
  const Status refused = ReadGrammarFields(json{{"grammar", wide}}, &w);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(refused.reason(), "grammar_limit_exceeded") << refused;
  EXPECT_NE(refused.message().find("field 'grammar'"), std::string::npos);
  EXPECT_NE(refused.message().find("4096 parse stacks"), std::string::npos)
      << refused.message();
}

// With the request's key order at hand, a schema's properties come in the
// client's order (as llama-server's ordered JSON keeps them); without it,
// nlohmann::json's sorted order.
TEST(GrammarFieldsTest, SchemaPropertiesKeepTheClientsOrder) {
  const std::string text =
      R"({"json_schema": {"type": "object", "properties": {"b": {"type":
      "integer"}, "a": {"type": "integer"}}, "required": ["b", "a"]}})";
  const json body = json::parse(text);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  SamplingParams in_order;
  ASSERT_TRUE(ReadGrammarFields(body, &in_order, &ordered).ok());
  EXPECT_TRUE(in_order.grammar->Accepts("{\"b\": 1, \"a\": 2}"));
  EXPECT_FALSE(in_order.grammar->Accepts("{\"a\": 2, \"b\": 1}"));
  SamplingParams sorted;
  ASSERT_TRUE(ReadGrammarFields(body, &sorted).ok());
  EXPECT_TRUE(sorted.grammar->Accepts("{\"a\": 2, \"b\": 1}"));
}

}  // namespace
}  // namespace kvault

namespace kvault {
namespace {

// Answers "stop" from its `stop_at`-th question on (never when 0),
// counting the questions.
class StopAt final : public Interrupt {
 public:
  explicit StopAt(int stop_at) : stop_at_(stop_at) {}
  bool Requested() const override {
    ++asked_;
    return stop_at_ > 0 && asked_ >= stop_at_;
  }
  int asked() const { return asked_; }

 private:
  const int stop_at_;
  mutable int asked_ = 0;
};

GrammarSource EnumSchema(int n) {
  GrammarSource source;
  source.field = "json_schema";
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < n; ++i) values.push_back("v" + std::to_string(i));
  source.schema = {{"enum", values}};
  return source;
}

GrammarSource AlternativesGbnf(int n) {
  GrammarSource source;
  source.field = "grammar";
  source.gbnf = "root ::= \"word0\"";
  for (int i = 1; i < n; ++i) {
    source.gbnf += " | \"word" + std::to_string(i) + "\"";
  }
  return source;
}

// Regression (issue 40): a schema compile could not be stopped. Every
// stage (conversion, parse, the builder's passes) asks the interrupt often
// (at least once per 1,000 enum values or alternatives), and a request to
// stop at any of those questions ends the compile with Cancelled.
TEST(GrammarCompileTest, StopsAtAnyQuestionOfTheInterrupt) {
  for (const GrammarSource& source : {EnumSchema(20000), AlternativesGbnf(5000)}) {
    StopAt never(0);
    StatusOr<CompiledGrammar> full = CompileGrammarSource(source, &never);
    ASSERT_TRUE(full.ok()) << full.status();
    const int questions = never.asked();
    std::printf("%s: %d questions to the interrupt\n", source.field.c_str(),
                questions);
    EXPECT_GE(questions, 20);
    for (int at : {1, questions / 3, 2 * questions / 3, questions}) {
      StopAt stop(at);
      StatusOr<CompiledGrammar> r = CompileGrammarSource(source, &stop);
      ASSERT_FALSE(r.ok()) << "stop at question " << at;
      EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status();
      EXPECT_EQ(r.status().reason(), "cancelled") << r.status();
      EXPECT_EQ(stop.asked(), at);  // nothing more was asked: it stopped
    }
  }
}

TEST(GrammarCompileTest, SmallSourcesAreToldApart) {
  EXPECT_TRUE(IsSmallGrammarSource(EnumSchema(100)));
  EXPECT_FALSE(IsSmallGrammarSource(EnumSchema(5000)));
  EXPECT_TRUE(IsSmallGrammarSource(AlternativesGbnf(10)));
  EXPECT_FALSE(IsSmallGrammarSource(AlternativesGbnf(5000)));
}

}  // namespace
}  // namespace kvault
