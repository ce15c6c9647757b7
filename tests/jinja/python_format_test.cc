// Python text forms: float repr, str repr quoting, json.dumps options.
// Expected strings are CPython 3.11's repr()/json.dumps() results.
#include "jinja/python_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvault::jinja {
namespace {

TEST(PythonFormatTest, FloatReprIsShortestRoundTrip) {
  EXPECT_EQ(FloatRepr(0.1), "0.1");
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(-2.5), "-2.5");
  EXPECT_EQ(FloatRepr(1e-05), "1e-05");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1.5e300), "1.5e+300");
  EXPECT_EQ(FloatRepr(5e-324), "5e-324");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FloatRepr(std::nan("")), "nan");
}

TEST(PythonFormatTest, StringReprPicksQuotesLikePython) {
  EXPECT_EQ(StringRepr("abc"), "'abc'");
  EXPECT_EQ(StringRepr("it's"), "\"it's\"");
  EXPECT_EQ(StringRepr("say \"hi\""), "'say \"hi\"'");
  EXPECT_EQ(StringRepr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(StringRepr("a\nb\tc\\"), "'a\\nb\\tc\\\\'");
  EXPECT_EQ(StringRepr("\x01\x7f"), "'\\x01\\x7f'");
  EXPECT_EQ(StringRepr("é日本\xc2\xa0"), "'é日本\\xa0'");
  EXPECT_EQ(StringRepr("\xe2\x80\xa8"), "'\\u2028'");
}

TEST(PythonFormatTest, ReprOfContainers) {
  ValueMap m;
  m.Set("location", Value::String("Paris"));
  m.Set("n", Value::None());
  m.Set("ok", Value::Bool(true));
  EXPECT_EQ(Repr(Value::Dict(m)),
            "{'location': 'Paris', 'n': None, 'ok': True}");
  EXPECT_EQ(Repr(Value::Tuple({Value::Int(1)})), "(1,)");
  EXPECT_EQ(Repr(Value::List({Value::Float(2.0), Value()})),
            "[2.0, Undefined]");
  EXPECT_EQ(ToStr(Value()), "");
  EXPECT_EQ(ToStr(Value::String("x")), "x");
}

TEST(PythonFormatTest, DumpJsonDefaultsMatchJsonDumps) {
  ValueMap inner;
  inner.Set("b", Value::List({}));
  ValueMap m;
  m.Set("z", Value::String("é\"<>\n\x1f\x7f"));
  m.Set("a", Value::Dict(inner));
  m.Set("f", Value::Float(1e-05));
  m.Set("e", Value::Dict({}));
  const Value v = Value::Dict(m);
  EXPECT_EQ(*DumpJson(v, JsonOptions{}),
            "{\"z\": \"é\\\"<>\\n\\u001f\x7f\", \"a\": {\"b\": []}, "
            "\"f\": 1e-05, \"e\": {}}");
  JsonOptions indented;
  indented.indent = "  ";
  indented.item_separator = ",";
  indented.sort_keys = true;
  EXPECT_EQ(*DumpJson(v, indented),
            "{\n  \"a\": {\n    \"b\": []\n  },\n  \"e\": {},\n"
            "  \"f\": 1e-05,\n  \"z\": \"é\\\"<>\\n\\u001f\x7f\"\n}");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(*DumpJson(Value::String("é😀"), ascii), "\"\\u00e9\\ud83d\\ude00\"");
}

TEST(PythonFormatTest, DumpJsonRejectsWhatJsonCannotHold) {
  EXPECT_FALSE(DumpJson(Value(), JsonOptions{}).ok());
  EXPECT_FALSE(DumpJson(Value::Generator({}), JsonOptions{}).ok());
  EXPECT_EQ(*DumpJson(Value::Tuple({Value::Int(1)}), JsonOptions{}), "[1]");
  EXPECT_EQ(*DumpJson(Value::Float(INFINITY), JsonOptions{}), "Infinity");
}

}  // namespace
}  // namespace kvault::jinja
