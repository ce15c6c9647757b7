#include "bench/scenarios/grammar_bench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kvault::bench {
namespace {

const std::string kShared = std::string(KVAULT_SOURCE_DIR) + "/../shared";

GrammarBenchOptions Options(const std::string& grammar_path) {
  GrammarBenchOptions o;
  o.model_path = kShared + "/models/stories260K.gguf";
  o.grammar_path = grammar_path;
  o.num_gen = 24;
  o.reps = 2;
  return o;
}

TEST(GrammarBenchTest, ConstrainedRunsDecodeSentencesOfTheGrammar) {
  if (!std::filesystem::exists(kShared + "/models")) GTEST_SKIP();
  const std::string path = ::testing::TempDir() + "/yes_no.gbnf";
  std::ofstream(path) << "root ::= (\"yes\" | \"no\") \".\"\n";
  auto r = RunGrammarBench(Options(path));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->plain_tok_s, 0);
  EXPECT_GT(r->grammar_tok_s, 0);
  // A sentence is at most 4 tokens and end-of-generation: many complete.
  EXPECT_GE(r->num_sentences, 2u * 24 / 8);
  // The sample is sentences back to back (end-of-generation has no text),
  // the last one possibly cut.
  std::string rest = r->sample;
  while (!rest.empty()) {
    if (std::string("yes.").rfind(rest, 0) == 0 ||
        std::string("no.").rfind(rest, 0) == 0) {
      break;
    }
    const size_t n = rest.rfind("yes.", 0) == 0 ? 4 : 3;
    ASSERT_TRUE(rest.rfind("yes.", 0) == 0 || rest.rfind("no.", 0) == 0)
        << r->sample;
    rest.erase(0, n);
  }
}

TEST(GrammarBenchTest, InvalidGrammarIsAnErrorNamingTheFile) {
  const std::string path = ::testing::TempDir() + "/bad.gbnf";
  std::ofstream(path) << "root ::= (\"a\"\n";
  auto r = RunGrammarBench(Options(path));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("bad.gbnf"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kvault::bench
