// A grammar constrains the sampler as llama.cpp's common_sampler does: the
// chain's pick when the grammar allows it, else a pick among what it
// allows; end of generation only where the grammar is complete.
#include "model/sampler_grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/sampler.h"
#include "sampling_test_util.h"

namespace kvault {
namespace {

using sampling::FakeVocab;

class SamplerGrammarTest : public testing::Test {
 protected:
  void SetUp() override {
    vocab_ = std::make_unique<FakeVocab>(std::vector<std::string>{
        "</s>", "a", "b", "ab", "ba", "c", "{", "}", "\"", "x", "", "abc"});
    vocab_->set_eog(0);
    trie_ = BuildGrammarTrie(*vocab_);
  }

  // Returns a sampler with `p` and the grammar `gbnf` over the vocabulary.
  Sampler GrammarSampler(const std::string& gbnf, SamplingParams p) const {
    auto grammar = Grammar::Parse(gbnf);
    EXPECT_TRUE(grammar.ok()) << grammar.status();
    p.grammar = std::make_shared<const Grammar>(std::move(grammar).value());
    p.grammar_text = gbnf;
    SamplerContext ctx;
    ctx.vocab = vocab_.get();
    ctx.grammar_trie = trie_.get();
    return Sampler(p, ctx);
  }

  // Samples up to `n` tokens at temperature 1 with random logits; returns
  // the text and whether generation ended at end-of-generation.
  std::pair<std::string, bool> Generate(const std::string& gbnf,
                                        uint32_t seed, int n) {
    SamplingParams p;
    p.seed = seed;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler sampler = GrammarSampler(gbnf, p);
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 2.0f);
    std::string text;
    for (int i = 0; i < n; ++i) {
      std::vector<float> logits(vocab_->size());
      for (float& l : logits) l = noise(rng);
      const TokenId t = sampler.Sample(logits);
      if (vocab_->IsEndOfGeneration(t)) return {text, true};
      sampler.AcceptGenerated(t);
      text += vocab_->Piece(t);
    }
    return {text, false};
  }

  std::unique_ptr<FakeVocab> vocab_;
  std::unique_ptr<TokenTrie> trie_;
};

TEST_F(SamplerGrammarTest, EveryOutputIsInTheLanguage) {
  const std::string gbnf = "root ::= (\"a\" | \"b\")+ \"c\"";
  auto grammar = Grammar::Parse(gbnf);
  ASSERT_TRUE(grammar.ok());
  int ended = 0;
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    auto [text, eog] = Generate(gbnf, seed, 40);
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + text);
    if (eog) {
      ++ended;
      EXPECT_TRUE(grammar->Accepts(text));
    } else {
      // Cut off: still a prefix of a sentence (only a's and b's, at most
      // one final c, which ends the sentence).
      EXPECT_EQ(text.find_first_not_of("ab"), text.find('c'));
    }
  }
  EXPECT_GT(ended, 0);
}

TEST_F(SamplerGrammarTest, EndOfGenerationOnlyWhenComplete) {
  auto grammar = Grammar::Parse("root ::= \"ab\" \"c\"");
  ASSERT_TRUE(grammar.ok());
  SamplerGrammar g(std::make_shared<const Grammar>(std::move(*grammar)),
                   vocab_.get(), trie_.get());
  EXPECT_FALSE(g.Allows(0));   // </s> before anything
  EXPECT_TRUE(g.Allows(1));    // "a"
  EXPECT_TRUE(g.Allows(3));    // "ab"
  EXPECT_TRUE(g.Allows(11));   // "abc"
  EXPECT_FALSE(g.Allows(10));  // no text
  EXPECT_FALSE(g.Allows(2));   // "b"
  std::vector<float> logits(vocab_->size(), 0.0f);
  EXPECT_TRUE(g.Mask(logits));
  for (TokenId id : {0, 2, 4, 5, 10}) EXPECT_TRUE(std::isinf(logits[id])) << id;
  for (TokenId id : {1, 3, 11}) EXPECT_EQ(logits[id], 0.0f) << id;
  g.Accept(11);
  EXPECT_TRUE(g.Allows(0));
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_TRUE(g.Mask(logits));
  for (size_t id = 1; id < logits.size(); ++id) EXPECT_TRUE(std::isinf(logits[id]));
}

// Regression (issue 40): when the grammar allows no token (here it needs
// a "z" no token spells), Sample used to return end-of-generation as if
// the output were complete; now it says why, and the engine fails the
// request.
TEST_F(SamplerGrammarTest, NoAllowedTokenIsAnErrorNotACompletion) {
  Sampler sampler = GrammarSampler("root ::= \"a\" \"z\"", SamplingParams());
  std::vector<float> logits(vocab_->size(), 0.0f);
  logits[2] = 5.0f;  // "b": refused, so the mask runs
  const TokenId first = sampler.Sample(logits);
  EXPECT_EQ(vocab_->Piece(first), "a");
  EXPECT_TRUE(sampler.grammar_error().ok()) << sampler.grammar_error();
  sampler.AcceptGenerated(first);
  sampler.Sample(logits);
  EXPECT_EQ(sampler.grammar_error().reason(), "grammar_dead_end")
      << sampler.grammar_error();
}

}  // namespace
}  // namespace kvault
