#include "server/json_fields.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

using nlohmann::json;

TEST(JsonFieldsTest, ParseJsonObjectAcceptsObjects) {
  auto j = ParseJsonObject(R"({"a": 1, "b": "x"})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"], 1);
}

TEST(JsonFieldsTest, ParseJsonObjectErrors) {
  struct Case {
    std::string body;
    std::string reason;
    std::string needle;
  };
  const Case cases[] = {
      {"{\"a\": ", "malformed_json", "malformed JSON"},
      {"{'a': 1}", "malformed_json", "parse error"},
      {"", "malformed_json", "0 bytes"},
      {"[1, 2]", "invalid_field", "got array"},
      {"42", "invalid_field", "got integer"},
      {"{\"a\": \"\xff\"}", "invalid_utf8", "byte 7"},
      {"{\"a\": \"\xe2\x82\"}", "invalid_utf8", "byte 7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto j = ParseJsonObject(c.body);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(j.status().reason(), c.reason);
    EXPECT_NE(j.status().message().find(c.needle), std::string_view::npos)
        << j.status().message();
  }
}

TEST(JsonFieldsTest, DeepNestingIsRefusedBeforeParsing) {
  // [ x 10^6 ] x 10^6 was parsed in full (~60 MB) before being refused as
  // not an object (issue 17, fault 3).
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto r = ParseJsonObject(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "json_too_deep");
  EXPECT_NE(r.status().message().find("128 levels at byte 128"),
            std::string::npos)
      << r.status().message();
  // Exactly at the limit is fine; brackets inside strings do not count.
  const std::string at_limit = "{\"a\":" + std::string(127, '[') +
                               std::string(127, ']') + "}";
  EXPECT_TRUE(ParseJsonObject(at_limit).ok());
  const std::string in_string = "{\"a\": \"" + std::string(500, '[') +
                                "\\\"" + std::string(500, '{') + "\"}";
  auto s = ParseJsonObject(in_string);
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(JsonFieldsTest, TooManyValuesAreRefusedBeforeParsing) {
  JsonLimits limits;
  limits.max_values = 4;
  EXPECT_TRUE(CheckJsonShape(R"({"p": [1, 2, 3, 4]})", limits).ok());
  Status s = CheckJsonShape(R"({"p": [1, 2, 3, 4, 5]})", limits);
  EXPECT_EQ(s.reason(), "json_too_large");
  EXPECT_NE(s.message().find("more than 4 values"), std::string::npos);
  // Commas inside strings are text.
  EXPECT_TRUE(CheckJsonShape(R"({"p": "a,b,c,d,e,f"})", limits).ok());
}

TEST(JsonFieldsTest, AbsentAndNullKeepTheDefault) {
  json body{{"n", nullptr}};
  int64_t n = 7;
  EXPECT_TRUE(ReadInt(body, "n", 0, 10, &n).ok());
  EXPECT_TRUE(ReadInt(body, "missing", 0, 10, &n).ok());
  EXPECT_EQ(n, 7);
}

TEST(JsonFieldsTest, ReadIntChecksTypeAndRange) {
  int64_t n = 0;
  EXPECT_TRUE(ReadInt(json{{"n", 8.0}}, "n", 0, 10, &n).ok());
  EXPECT_EQ(n, 8);
  Status s = ReadInt(json{{"n", "8"}}, "n", 0, 10, &n);
  EXPECT_EQ(s.reason(), "invalid_field");
  EXPECT_EQ(s.message(), "field 'n': expected an integer, got string \"8\"");
  s = ReadInt(json{{"n", 8.5}}, "n", 0, 10, &n);
  EXPECT_EQ(s.reason(), "invalid_field");
  s = ReadInt(json{{"n", 11}}, "n", 0, 10, &n);
  EXPECT_EQ(s.reason(), "out_of_range");
  EXPECT_EQ(s.message(), "field 'n': 11 is outside [0, 10]");
  s = ReadInt(json{{"n", 18446744073709551615ull}}, "n", 0, 10, &n);
  EXPECT_EQ(s.reason(), "out_of_range");
  s = ReadInt(json{{"n", true}}, "n", 0, 10, &n);
  EXPECT_EQ(s.reason(), "invalid_field");
  EXPECT_EQ(n, 8);  // errors leave the output alone
}

TEST(JsonFieldsTest, ReadBoolFloatString) {
  bool b = false;
  EXPECT_TRUE(ReadBool(json{{"b", true}}, "b", &b).ok());
  EXPECT_TRUE(b);
  EXPECT_EQ(ReadBool(json{{"b", 1}}, "b", &b).message(),
            "field 'b': expected a boolean, got integer 1");
  float f = 0;
  EXPECT_TRUE(ReadFloat(json{{"f", 1}}, "f", &f).ok());
  EXPECT_EQ(f, 1.0f);
  EXPECT_TRUE(ReadFloat(json{{"f", 0.25}}, "f", &f).ok());
  EXPECT_EQ(f, 0.25f);
  EXPECT_EQ(ReadFloat(json{{"f", "0.5"}}, "f", &f).reason(), "invalid_field");
  EXPECT_EQ(ReadFloat(json{{"f", 1e300}}, "f", &f).reason(), "out_of_range");
  std::string s;
  EXPECT_TRUE(ReadString(json{{"s", "x"}}, "s", &s).ok());
  EXPECT_EQ(s, "x");
  EXPECT_EQ(ReadString(json{{"s", json::array()}}, "s", &s).message(),
            "field 's': expected a string, got array []");
}

TEST(JsonFieldsTest, LongValuesAreCutInMessages) {
  std::string big(1000, 'z');
  bool b = false;
  Status s = ReadBool(json{{"b", big}}, "b", &b);
  EXPECT_LT(s.message().size(), 120u);
}

}  // namespace
}  // namespace kvault
