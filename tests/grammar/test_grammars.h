// Helpers shared by the grammar tests: the conformance grammars and a
// synthetic vocabulary.
#ifndef KVAULT_TESTS_GRAMMAR_TEST_GRAMMARS_H_
#define KVAULT_TESTS_GRAMMAR_TEST_GRAMMARS_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kvault {

inline std::filesystem::path ConformanceGrammarDir() {
  return std::filesystem::path(KVAULT_SOURCE_DIR) / ".." / "shared" /
         "conformance" / "grammars";
}

// Returns the text of conformance grammar `name` ("json"), or "" if absent.
inline std::string ConformanceGrammar(const std::string& name) {
  std::ifstream in(ConformanceGrammarDir() / (name + ".gbnf"),
                   std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::shared_ptr<const Grammar> MustParse(const std::string& gbnf) {
  StatusOr<Grammar> g = Grammar::Parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

// A vocabulary with JSON pieces, every single byte, multi-byte characters
// split across tokens, and seeded random byte strings.
inline std::vector<std::string> SyntheticVocab(size_t random_tokens,
                                               uint32_t seed) {
  std::vector<std::string> v = {
      "",     "{",        "}",        "[",    "]",        ",",    ":",
      "\"",   "{\"",      "\":",      "\": ", "\",",      "\"}",  ", ",
      " ",    "\n",       "\n  ",     "true", "false",    "null", "0",
      "1",    "12",       "-",        ".",    "e",        "E+",   "\\",
      "\\n",  "\\u",      "00e9",     "abc",  "key",      "name", "value",
      " \"",  "é",        "\xC3",     "\xA9", "\xE2\x82", "\xAC", "€",
      "日本", "\xF0\x9F", "\x98\x80", "😀",    "[1",       "],",   "}}",
      "]]",   "1.5",      "-3",       "a",    "b",        "z",    "x+y",
      "(",    ")",        "=",        "+",    "*",        "/",    "- ",
      "item",
  };
  for (int b = 1; b < 256; ++b)
    v.push_back(std::string(1, static_cast<char>(b)));
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[],:\" \n\\abcdeu0123456789.-+eEtrufalsn";
  for (size_t i = 0; i < random_tokens; ++i) {
    std::string t;
    const size_t len = 1 + rng() % 6;
    for (size_t k = 0; k < len; ++k) {
      if (rng() % 8 == 0) {
        t.push_back(static_cast<char>(0x80 + rng() % 0x70));
      } else {
        t.push_back(alphabet[rng() % alphabet.size()]);
      }
    }
    v.push_back(t);
  }
  return v;
}

}  // namespace kvault

#endif  // KVAULT_TESTS_GRAMMAR_TEST_GRAMMARS_H_
