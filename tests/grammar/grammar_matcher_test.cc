// The matcher: sentences of the conformance grammars are accepted and
// others refused, byte by byte and token by token (UTF-8 split across
// tokens), completion is reported, limits hold, and the trie walk in
// AllowedTokens agrees exactly with checking every token on its own.
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "test_grammars.h"

namespace kvault {
namespace {

std::shared_ptr<const Grammar> Conformance(const std::string& name) {
  const std::string text = ConformanceGrammar(name);
  if (text.empty()) return nullptr;
  return MustParse(text);
}

#define REQUIRE_GRAMMAR(g, name) \
  auto g = Conformance(name);    \
  if (g == nullptr) GTEST_SKIP() << "no conformance grammar " << name

TEST(GrammarMatcherTest, Arithmetic) {
  REQUIRE_GRAMMAR(g, "arithmetic");
  EXPECT_TRUE(g->Accepts("x=1\n"));
  EXPECT_TRUE(g->Accepts("a+b*(c-1)= 2\nfoo_1/3= bar \n"));
  EXPECT_FALSE(g->Accepts(""));
  EXPECT_FALSE(g->Accepts("x=1"));    // the newline is required
  EXPECT_FALSE(g->Accepts("X=1\n"));  // identifiers are lower case
  EXPECT_FALSE(g->Accepts("x==1\n"));
  EXPECT_FALSE(g->Accepts("(x=1\n"));
}

TEST(GrammarMatcherTest, Json) {
  REQUIRE_GRAMMAR(g, "json");
  EXPECT_TRUE(g->Accepts("{}"));
  EXPECT_TRUE(g->Accepts(R"({"a": [1, -2.5e+3, true, null, "x\n\u00e9"]})"));
  EXPECT_TRUE(g->Accepts("{\n  \"k\": {\"n\": \"日本\"}\n}"));
  EXPECT_TRUE(g->Accepts("{\"a\":1} "));
  EXPECT_FALSE(g->Accepts("[]"));  // root is an object
  EXPECT_FALSE(g->Accepts("{\"a\":}"));
  EXPECT_FALSE(g->Accepts("{\"a\":1,}"));
  EXPECT_FALSE(g->Accepts("{\"a\":\"\x01\"}"));  // control char in string
  EXPECT_FALSE(g->Accepts("{\"a\":\"\\q\"}"));
  EXPECT_FALSE(g->Accepts("{\"a\":01}"));
  EXPECT_FALSE(g->Accepts("{\"a\":\"\xC3\"}"));  // truncated UTF-8
}

TEST(GrammarMatcherTest, ListWithNegatedClass) {
  REQUIRE_GRAMMAR(g, "list");
  EXPECT_TRUE(g->Accepts("- milk\n- 日本 eggs\n"));
  EXPECT_FALSE(g->Accepts("- milk"));
  EXPECT_FALSE(g->Accepts("- a\rb\n"));
  EXPECT_FALSE(g->Accepts("- a\u2028b\n"));  // excluded by \u2028
  EXPECT_FALSE(g->Accepts("- \n"));
}

TEST(GrammarMatcherTest, OtherConformanceGrammars) {
  REQUIRE_GRAMMAR(chess, "chess");
  EXPECT_TRUE(chess->Accepts("1. e4 e5\n2. Nf3 Nc6\n"));
  EXPECT_FALSE(chess->Accepts("1. e4 e5\n"));
  REQUIRE_GRAMMAR(jp, "japanese");
  EXPECT_TRUE(jp->Accepts("こんにちは 世界"));
  EXPECT_FALSE(jp->Accepts("hello"));
  REQUIRE_GRAMMAR(c, "c");
  EXPECT_TRUE(c->Accepts("int main(){return 0;}"));
  EXPECT_FALSE(c->Accepts("int main({return 0;}"));
  REQUIRE_GRAMMAR(en, "english");
  EXPECT_TRUE(en->Accepts("Hello, world!"));
  EXPECT_FALSE(en->Accepts("Hello  world"));
}

TEST(GrammarMatcherTest, CountedRepetition) {
  auto g = MustParse("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,}\n");
  EXPECT_TRUE(g->Accepts("aabcc"));
  EXPECT_TRUE(g->Accepts("aabbbccccc"));
  EXPECT_FALSE(g->Accepts("abcc"));
  EXPECT_FALSE(g->Accepts("aaabcc"));
  EXPECT_FALSE(g->Accepts("aabbbbcc"));
  EXPECT_FALSE(g->Accepts("aabc"));
  // A repetition applies to a whole multi-character literal.
  auto lit = MustParse("root ::= \"ab\"{2}\n");
  EXPECT_TRUE(lit->Accepts("abab"));
  EXPECT_FALSE(lit->Accepts("abb"));
}

TEST(GrammarMatcherTest, CompletionAndContinuation) {
  auto g = MustParse("root ::= \"ab\" \"c\"?\n");
  GrammarMatcher m(g);
  EXPECT_FALSE(m.IsComplete());
  EXPECT_TRUE(m.CanContinue());
  ASSERT_TRUE(m.AcceptBytes("a"));
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.CanContinue());
  GrammarMatcher clone = m;  // the sampler clones to try a candidate
  EXPECT_FALSE(m.AcceptBytes("x"));
  EXPECT_TRUE(m.IsComplete());  // a rejected token leaves the state as is
  ASSERT_TRUE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.CanContinue());
  EXPECT_FALSE(m.AcceptBytes("c"));
  EXPECT_TRUE(clone.CanAccept("c"));
  EXPECT_FALSE(clone.CanAccept("cc"));
  m.Reset();
  EXPECT_TRUE(m.AcceptBytes("abc"));
  EXPECT_TRUE(m.status().ok());
}

TEST(GrammarMatcherTest, PartialUtf8AcrossTokens) {
  auto g = MustParse("root ::= \"x\" [é€] \"😀\"\n");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("x\xE2"));  // first byte of €
  EXPECT_FALSE(m.IsComplete());
  EXPECT_FALSE(m.CanAccept("\x81"));  // E2 81 .. is not €
  ASSERT_TRUE(m.AcceptBytes("\x82"));
  ASSERT_TRUE(m.AcceptBytes("\xAC\xF0\x9F"));
  EXPECT_FALSE(m.CanAccept("\x98\x81"));
  ASSERT_TRUE(m.AcceptBytes("\x98"));
  ASSERT_TRUE(m.AcceptBytes("\x80"));
  EXPECT_TRUE(m.IsComplete());
  GrammarMatcher bad(g);
  EXPECT_FALSE(bad.AcceptBytes("x\xC3\xA8"));  // è, not é
  EXPECT_FALSE(bad.AcceptBytes("x\xE4"));      // no member starts with E4
  EXPECT_FALSE(bad.AcceptBytes("x\x80"));      // stray continuation byte
  EXPECT_FALSE(bad.AcceptBytes("x\xC0\xA9"));  // overlong encoding
}

TEST(GrammarMatcherTest, NegatedClassAndAnyCharTakeMultiByte) {
  auto g = MustParse("root ::= [^a] . \"!\"\n");
  EXPECT_TRUE(g->Accepts("b\xF0\x9F\x98\x80!"));
  EXPECT_TRUE(g->Accepts("日x!"));
  EXPECT_FALSE(g->Accepts("ax!"));
  EXPECT_FALSE(g->Accepts("b\xED\xA0\x80!"));  // a surrogate is not UTF-8
}

std::vector<uint8_t> BruteForce(const GrammarMatcher& m,
                                const std::vector<std::string>& vocab);

TEST(GrammarMatcherTest, InvalidUtf8NeverMatchesEvenAnyChar) {
  auto g = MustParse("root ::= .+\n");
  EXPECT_TRUE(g->Accepts("\xE0\xA0\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(g->Accepts("\xE0\x80\x80"));      // overlong
  EXPECT_FALSE(g->Accepts("\xF0\x80\x80\x80"));  // overlong
  EXPECT_FALSE(g->Accepts("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(g->Accepts("\xED\xBF\xBF"));      // surrogate
  EXPECT_TRUE(g->Accepts("\xED\x9F\xBF"));       // U+D7FF
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("\xE4"));
  EXPECT_FALSE(m.CanAccept("a"));  // a character is half received
  ASSERT_TRUE(m.AcceptBytes("\xB8"));
  ASSERT_TRUE(m.AcceptBytes("\x80"));
  EXPECT_TRUE(m.IsComplete());
}

TEST(GrammarMatcherTest, PartialCharacterKeepsStacksApart) {
  // After E0 A0 one alternative takes every completion, the other only
  // some: the bytes still decide which continues.
  auto g =
      MustParse("root ::= [\\u0800-\\u0FFF] \"a\" | [\\u0800-\\u0801] \"b\"\n");
  EXPECT_TRUE(
      g->Accepts("\xE0\xA0\x80"
                 "a"));
  EXPECT_TRUE(
      g->Accepts("\xE0\xA0\x80"
                 "b"));
  EXPECT_TRUE(
      g->Accepts("\xE0\xA0\x82"
                 "a"));
  EXPECT_FALSE(
      g->Accepts("\xE0\xA0\x82"
                 "b"));
  const std::vector<std::string> vocab = {"\xE0", "\xA0", "\x80",    "\x82",
                                          "a",    "b",    "\xE0\xA0"};
  const TokenTrie trie(vocab);
  GrammarMatcher m(g);
  for (const char* piece : {"\xE0", "\xA0", "\x82"}) {
    std::vector<uint8_t> allowed;
    m.AllowedTokens(trie, &allowed);
    ASSERT_EQ(allowed, BruteForce(m, vocab)) << "before " << piece;
    ASSERT_TRUE(m.AcceptBytes(piece));
  }
  EXPECT_TRUE(m.CanAccept("a"));
  EXPECT_FALSE(m.CanAccept("b"));
}

TEST(GrammarMatcherTest, StackLimitRejectsInsteadOfExploding) {
  // Each "a" may promise a "b" or a "c" later: 2^n distinct stacks (x and
  // y both match "a" but are different rules, so nothing factors out).
  auto g = MustParse(
      "root ::= x root \"b\" | y root \"c\" | \"\"\n"
      "x ::= \"a\"\ny ::= \"a\" | \"d\"\n");
  MatchLimits limits;
  limits.max_stacks = 8;
  GrammarMatcher m(g, limits);
  bool rejected = false;
  for (int i = 0; i < 200 && !rejected; ++i) rejected = !m.AcceptBytes("a");
  EXPECT_TRUE(rejected);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().reason(), "grammar_limit_exceeded");
}

// Regression (issue 40): an alternation of thousands of literals started
// with one parse stack per alternative, past the 4,096-stack bound, so the
// output was empty. Left-factored, the start has one stack per distinct
// first character, and the language is unchanged.
TEST(GrammarMatcherTest, HugeAlternationsOfLiteralsStayWithinTheLimits) {
  constexpr int kWords = 20000;
  std::string gbnf = "root ::= ";
  for (int i = 0; i < kWords; ++i) {
    gbnf += (i ? " | \"w" : "\"w") + std::to_string(i) + "\"";
  }
  const auto start = std::clock();
  auto g = MustParse(gbnf);
  GrammarMatcher m(g);
  std::printf("%d alternatives: parsed and started in %.3f s of CPU\n", kWords,
              double(std::clock() - start) / CLOCKS_PER_SEC);
  ASSERT_TRUE(m.status().ok()) << m.status();
  for (int i : {0, 7, 1999, 12345, 19999}) {
    GrammarMatcher w = m;
    ASSERT_TRUE(w.AcceptBytes("w" + std::to_string(i))) << i;
    EXPECT_TRUE(w.IsComplete()) << i;
  }
  GrammarMatcher w = m;
  ASSERT_TRUE(w.AcceptBytes("w2000"));
  EXPECT_FALSE(w.AcceptBytes("0"));  // w20000 is not a word
  EXPECT_FALSE(m.CanAccept("x"));
  std::mt19937 rng(7);
  for (int n = 0; n < 300; ++n) {
    const int v = static_cast<int>(rng() % 30000);
    const std::string text = "w" + std::to_string(v);
    EXPECT_EQ(g->Accepts(text), v < kWords) << text;
  }
}

// Duplicated alternatives (a_i ::= a_{i+1} | a_{i+1}, 20 deep) used to
// expand into 2^20 stacks: they collapse into one.
TEST(GrammarMatcherTest, DuplicatedAlternativesCollapse) {
  std::string gbnf = "root ::= a0\n";
  for (int i = 0; i < 20; ++i) {
    gbnf += "a" + std::to_string(i) + " ::= a" + std::to_string(i + 1) +
            " | a" + std::to_string(i + 1) + "\n";
  }
  gbnf += "a20 ::= \"x\" | \"yz\"\n";
  auto g = MustParse(gbnf);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.status().ok()) << m.status();
  EXPECT_TRUE(g->Accepts("x"));
  EXPECT_TRUE(g->Accepts("yz"));
  EXPECT_FALSE(g->Accepts("y"));
  EXPECT_FALSE(g->Accepts("xx"));
}

// Factoring keeps alternatives that are prefixes of others, empty ones and
// shared rule references apart from what follows them.
TEST(GrammarMatcherTest, LeftFactoringKeepsTheLanguage) {
  auto g = MustParse(
      "root ::= \"ab\" | \"abc\" | \"a\" | \"\" | \"abd\" r | r \"q\" | "
      "r\nr ::= [0-9] | [0-9] [0-9]\n");
  const std::vector<std::string> yes = {"ab", "abc", "a", "", "abd1", "abd12",
                                        "1q", "12q", "1", "12"};
  const std::vector<std::string> no = {"b", "abdq", "abd", "q", "123",
                                       "ac", "abcc", "12qq"};
  for (const std::string& s : yes) EXPECT_TRUE(g->Accepts(s)) << s;
  for (const std::string& s : no) EXPECT_FALSE(g->Accepts(s)) << s;
}

TEST(GrammarMatcherTest, DepthLimitStopsUnboundedNesting) {
  auto g = MustParse("root ::= \"(\" root \")\" | \"x\"\n");
  MatchLimits limits;
  limits.max_depth = 64;
  GrammarMatcher m(g, limits);
  EXPECT_TRUE(m.AcceptBytes(std::string(40, '(')));
  EXPECT_FALSE(m.AcceptBytes(std::string(40, '(')));
  EXPECT_FALSE(m.status().ok());
}

// The brute-force reference: every token checked on its own.
std::vector<uint8_t> BruteForce(const GrammarMatcher& m,
                                const std::vector<std::string>& vocab) {
  std::vector<uint8_t> out(vocab.size(), 0);
  for (size_t id = 0; id < vocab.size(); ++id) {
    out[id] = !vocab[id].empty() && m.CanAccept(vocab[id]);
  }
  return out;
}

void RandomWalksAgree(const std::shared_ptr<const Grammar>& g,
                      const std::vector<std::string>& vocab, uint32_t seed) {
  const TokenTrie trie(vocab);
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 5; ++walk) {
    GrammarMatcher m(g);
    for (int step = 0; step < 40; ++step) {
      std::vector<uint8_t> fast;
      m.AllowedTokens(trie, &fast);
      ASSERT_EQ(fast, BruteForce(m, vocab))
          << "walk " << walk << " step " << step;
      std::vector<uint32_t> ids;
      for (uint32_t id = 0; id < fast.size(); ++id) {
        if (fast[id]) ids.push_back(id);
      }
      if (ids.empty()) break;
      ASSERT_TRUE(m.AcceptBytes(vocab[ids[rng() % ids.size()]]));
    }
  }
}

TEST(GrammarMatcherTest, AllowedTokensMatchesBruteForce) {
  const std::vector<std::string> vocab = SyntheticVocab(3000, 7);
  for (const char* name : {"json", "arithmetic", "list", "japanese"}) {
    SCOPED_TRACE(name);
    REQUIRE_GRAMMAR(g, name);
    RandomWalksAgree(g, vocab, 11);
  }
}

TEST(GrammarMatcherTest, AllowedTokensExcludesEmptyAndSpecialTokens) {
  auto g = MustParse("root ::= [a-z]+\n");
  const std::vector<std::string> vocab = {"", "a", "<s>", "b", "1"};
  const TokenTrie trie(vocab, [](uint32_t id) { return id == 1; });
  GrammarMatcher m(g);
  std::vector<uint8_t> allowed;
  m.AllowedTokens(trie, &allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
}

// Not an assertion on time: prints the cost of one mask for a 32k
// vocabulary so regressions are visible in the test log.
TEST(GrammarMatcherTest, AllowedTokensTiming32k) {
  REQUIRE_GRAMMAR(g, "json");
  const std::vector<std::string> vocab = SyntheticVocab(32000, 3);
  const TokenTrie trie(vocab);
  for (const char* prefix : {"", "{\"na", "{\"a\": [1, ", "{\"a\": 12"}) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.AcceptBytes(prefix));
    std::vector<uint8_t> allowed;
    // Thread CPU time: the build machine is shared, wall time is noisy.
    auto cpu_us = [] {
      timespec t;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
    };
    const int kReps = 20;
    double cold = 0;
    for (int i = 0; i < kReps; ++i) {
      GrammarMatcher fresh = m;  // a copy starts with an empty cache
      const double t0 = cpu_us();
      fresh.AllowedTokens(trie, &allowed);
      cold += cpu_us() - t0;
    }
    m.AllowedTokens(trie, &allowed);
    const double t0 = cpu_us();
    for (int i = 0; i < kReps; ++i) m.AllowedTokens(trie, &allowed);
    const double warm = (cpu_us() - t0) / kReps;
    size_t n = 0;
    for (uint8_t a : allowed) n += a;
    std::printf(
        "AllowedTokens after '%s': %.1f us cold, %.1f us cached, %zu of %zu "
        "allowed, %zu trie nodes\n",
        prefix, cold / kReps, warm, n, vocab.size(), trie.num_nodes());
    EXPECT_GT(n, 0u);
  }
}

}  // namespace
}  // namespace kvault
