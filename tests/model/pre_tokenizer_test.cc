#include "model/pre_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/unicode_text.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Words = std::vector<std::string>;

Words Split(PreTokenizerType type, std::string_view text) {
  return PreTokenizer(type).Split(text);
}

TEST(LookupPreTokenizerTest, ResolvesNamesAndTheirFlags) {
  auto llama3 = LookupPreTokenizer("llama-bpe");
  ASSERT_TRUE(llama3.ok());
  EXPECT_EQ(llama3->type, PreTokenizerType::kLlama3);
  EXPECT_TRUE(llama3->ignore_merges);
  EXPECT_TRUE(llama3->add_bos);
  auto dflt = LookupPreTokenizer("");
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->type, PreTokenizerType::kDefault);
  EXPECT_EQ(LookupPreTokenizer("mpt")->type, PreTokenizerType::kGpt2);
  EXPECT_EQ(LookupPreTokenizer("refact")->type, PreTokenizerType::kStarcoder);
  EXPECT_EQ(LookupPreTokenizer("qwen2")->type, PreTokenizerType::kQwen2);
  EXPECT_FALSE(LookupPreTokenizer("qwen2")->add_bos);
}

TEST(LookupPreTokenizerTest, UnknownNameIsAnErrorNamingIt) {
  auto r = LookupPreTokenizer("klingon-bpe");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'klingon-bpe'"));
}

TEST(Gpt2SplitTest, WordsNumbersPunctuationAndSpaces) {
  const auto t = PreTokenizerType::kGpt2;
  EXPECT_THAT(Split(t, "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(Split(t, "I'm here"), ElementsAre("I", "'m", " here"));
  EXPECT_THAT(Split(t, "'S"), ElementsAre("'", "S"));  // case-sensitive
  EXPECT_THAT(Split(t, "3.14 abc"), ElementsAre("3", ".", "14", " abc"));
  // A run of spaces leaves its last space to the next word.
  EXPECT_THAT(Split(t, "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(Split(t, "   "), ElementsAre("   "));
  EXPECT_THAT(Split(t, "hello\n\nworld"),
              ElementsAre("hello", "\n", "\n", "world"));
  EXPECT_THAT(Split(t, " !!?"), ElementsAre(" !!?"));
  // Non-ASCII whitespace, letters and numbers by Unicode category.
  EXPECT_THAT(Split(t, "a\u00A0b"), ElementsAre("a", "\u00A0", "b"));
  EXPECT_THAT(Split(t, " \u00E9t\u00E9 \u0663\u0664"),
              ElementsAre(" \u00E9t\u00E9", " \u0663\u0664"));
  EXPECT_TRUE(Split(t, "").empty());
}

TEST(TekkenSplitTest, CasedWordsSingleDigitsAndSlashes) {
  const auto t = PreTokenizerType::kTekken;
  // The upper run backs off to the last capital a lower letter follows.
  EXPECT_THAT(Split(t, "XMLHttpRequest"), ElementsAre("XMLHttp", "Request"));
  EXPECT_THAT(Split(t, "HELLOworld aBc"),
              ElementsAre("HELLOworld", " a", "Bc"));
  EXPECT_THAT(Split(t, "ABC, x1"), ElementsAre("ABC", ",", " x", "1"));
  EXPECT_THAT(Split(t, "\tHi"), ElementsAre("\tHi"));  // any non-letter
  EXPECT_THAT(Split(t, "a // b/\n"), ElementsAre("a", " //", " b", "/\n"));
  // A non-ASCII letter is upper and lower at once.
  EXPECT_THAT(Split(t, "\u00C9LAN\u00E9"), ElementsAre("\u00C9LAN\u00E9"));
  auto info = LookupPreTokenizer("tekken");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->ignore_merges);
  EXPECT_TRUE(info->add_bos);
}

TEST(DeepseekCoderSplitTest, LettersPunctuationAndEachDigit) {
  const auto t = PreTokenizerType::kDeepseekCoder;
  // '=' is a math symbol, not \p{P}: the text between matches stays whole.
  EXPECT_THAT(Split(t, "x = 12;\n"),
              ElementsAre("x", " = ", "1", "2", ";", "\n"));
  EXPECT_THAT(Split(t, " foo(bar)"), ElementsAre(" foo", "(", "bar", ")"));
  EXPECT_THAT(Split(t, "\u4F60\u597D ok"), ElementsAre("\u4F60\u597D", " ok"));
  EXPECT_FALSE(LookupPreTokenizer("deepseek-coder")->add_bos);
}

TEST(Llama3SplitTest, DigitsInThreesAndNewlinesKept) {
  const auto t = PreTokenizerType::kLlama3;
  EXPECT_THAT(Split(t, "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(Split(t, "'S x"), ElementsAre("'S", " x"));  // case-insensitive
  EXPECT_THAT(Split(t, "Hello, world!\n\n"),
              ElementsAre("Hello", ",", " world", "!\n\n"));
  EXPECT_THAT(Split(t, "  \n  x"), ElementsAre("  \n", " ", " x"));
  // [^\r\n\p{L}\p{N}]?\p{L}+ : one leading non-letter joins the word.
  EXPECT_THAT(Split(t, "(hello"), ElementsAre("(hello"));
  EXPECT_THAT(Split(t, " 42"), ElementsAre(" ", "42"));
}

TEST(Qwen2SplitTest, DigitsOneByOne) {
  EXPECT_THAT(Split(PreTokenizerType::kQwen2, "x 12345"),
              ElementsAre("x", " ", "1", "2", "3", "4", "5"));
}

TEST(StarcoderSplitTest, EveryDigitIsolated) {
  EXPECT_THAT(Split(PreTokenizerType::kStarcoder, "abc123 x"),
              ElementsAre("abc", "1", "2", "3", " x"));
}

TEST(DefaultSplitTest, PunctuationRunsThenGpt2ThenDigitGroups) {
  const auto t = PreTokenizerType::kDefault;
  EXPECT_THAT(Split(t, "Hello, world!"),
              ElementsAre("Hello", ",", " world", "!"));
  EXPECT_THAT(Split(t, "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(Split(t, " `x"), ElementsAre(" `", "x"));
}

TEST(FalconSplitTest, BacktickIsPunctuation) {
  EXPECT_THAT(Split(PreTokenizerType::kFalcon, " `x"),
              ElementsAre(" ", "`", "x"));
  EXPECT_THAT(Split(PreTokenizerType::kFalcon, "a 1234"),
              ElementsAre("a", " ", "123", "4"));
}

TEST(DeepseekLlmSplitTest, ScriptsAndNumbersSeparated) {
  EXPECT_THAT(Split(PreTokenizerType::kDeepseekLlm, "Hello \u4E16\u754C 123\n"),
              ElementsAre("Hello", " ", "\u4E16\u754C", " ", "123", "\n"));
  EXPECT_THAT(Split(PreTokenizerType::kDeepseekLlm, "a, b  "),
              ElementsAre("a", ",", " b", "  "));
  // U+2003 lies inside the CJK class's range U+0800-U+4E00, but llama.cpp
  // turns non-ASCII whitespace into U+000B before matching, so it stays
  // with the following word.
  EXPECT_THAT(Split(PreTokenizerType::kDeepseekLlm, "\u2003r"),
              ElementsAre("\u2003r"));
}

// Every pre-tokenizer must cover its input exactly, with non-empty words,
// whatever the bytes (valid text comes back unchanged when concatenated).
TEST(PreTokenizerFuzzTest, WordsCoverTheText) {
  const uint32_t seed = 7;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::string> alphabet = {
      "a",      "Z",      "7",      " ",        "  ",      "\n",
      "\r",     "\t",     "'",      "s",        "!",       ",",
      "\u00E9", "\u4E16", "\u0663", "\u00A0",   "\u3000",  "\U0001F600",
      "`",      "\u0301", "\xFF",   "\xE2\x82", "\xC0\x80"};
  for (PreTokenizerType type :
       {PreTokenizerType::kDefault, PreTokenizerType::kGpt2,
        PreTokenizerType::kLlama3, PreTokenizerType::kQwen2,
        PreTokenizerType::kStarcoder, PreTokenizerType::kDeepseekLlm,
        PreTokenizerType::kFalcon}) {
    SCOPED_TRACE(std::string(PreTokenizerTypeName(type)));
    for (int iter = 0; iter < 300; ++iter) {
      std::string text;
      for (int n = rng() % 20; n > 0; --n) {
        text += alphabet[rng() % alphabet.size()];
      }
      std::string expected;
      for (char32_t cp : DecodeUtf8Lenient(text)) AppendUtf8(cp, &expected);
      std::string joined;
      for (const std::string& w : Split(type, text)) {
        EXPECT_FALSE(w.empty());
        joined += w;
      }
      EXPECT_EQ(joined, expected) << testing::PrintToString(text);
      if (IsValidUtf8(text)) {
        EXPECT_EQ(joined, text);
      }
    }
  }
}

TEST(PreTokenizerPerfTest, LongUniformRunsAreLinear) {
  // Long runs of one class once made regex-based splitters quadratic.
  const std::string spaces(200000, ' ');
  for (PreTokenizerType type :
       {PreTokenizerType::kDefault, PreTokenizerType::kLlama3,
        PreTokenizerType::kDeepseekLlm}) {
    EXPECT_EQ(Split(type, spaces + "x").size(), 2u);
    EXPECT_FALSE(Split(type, std::string(200000, '7')).empty());
  }
}

}  // namespace
}  // namespace kvault
