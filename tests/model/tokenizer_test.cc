#include "model/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::string_view kLowBlock = "\xE2\x96\x81";  // ▁

// SentencePiece vocabulary: <unk> <s> </s>, byte tokens, "<|im_start|>"
// (control), "<|im" (control, a prefix of it), "<tool>" (user-defined) and
// a few words.
Vocab SpmVocab() {
  Vocab v;
  v.kind = VocabKind::kSpm;
  auto add = [&v](std::string text, TokenType type, float score = 0) {
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown);
  add("<s>", TokenType::kControl);
  add("</s>", TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, TokenType::kByte);
  }
  add("<|im_start|>", TokenType::kControl);
  add("<|im", TokenType::kControl);
  add("<tool>", TokenType::kUserDefined);
  const std::string s(kLowBlock);
  for (const std::string& w :
       std::vector<std::string>{s, s + "hi", s + "there", "hi", "h", "i", "t",
                                "e", "r", "th", "the", "ther", "there"}) {
    add(w, TokenType::kNormal, -static_cast<float>(w.size()));
  }
  EXPECT_TRUE(ApplyVocabDefaults(&v).ok());
  return v;
}

std::unique_ptr<Tokenizer> MustCreate(Vocab v) {
  auto t = Tokenizer::Create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(TokenizerCreateTest, RejectsInconsistentVocabularies) {
  Vocab dup = SpmVocab();
  dup.tokens.push_back("<s>");
  dup.types.push_back(TokenType::kNormal);
  dup.scores.push_back(0);
  auto r = Tokenizer::Create(dup);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("duplicate"));

  Vocab bad_bos = SpmVocab();
  bad_bos.bos = 100000;
  r = Tokenizer::Create(bad_bos);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("tokenizer.ggml.bos_token_id"));

  Vocab short_scores = SpmVocab();
  short_scores.scores.pop_back();
  r = Tokenizer::Create(short_scores);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("tokenizer.ggml.scores"));

  Vocab bpe = SpmVocab();
  bpe.kind = VocabKind::kBpe;
  bpe.pre = "no-such-pre";
  r = Tokenizer::Create(bpe);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'no-such-pre'"));
}

class SpmFacadeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = MustCreate(SpmVocab());
    ASSERT_NE(tokenizer_, nullptr);
    for (size_t id = 0; id < tokenizer_->num_tokens(); ++id) {
      ids_[tokenizer_->vocab().tokens[id]] = static_cast<TokenId>(id);
    }
  }
  TokenId Id(const std::string& text) { return ids_.at(text); }
  std::string Low(const std::string& w) { return std::string(kLowBlock) + w; }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::map<std::string, TokenId> ids_;
};

TEST_F(SpmFacadeTest, LeadingSpaceRuleAndBos) {
  EXPECT_THAT(tokenizer_->Tokenize("hi there", false, false),
              ElementsAre(Id(Low("hi")), Id(Low("there"))));
  EXPECT_THAT(tokenizer_->Tokenize("hi", true, false),
              ElementsAre(Id("<s>"), Id(Low("hi"))));
  EXPECT_TRUE(tokenizer_->Tokenize("", false, false).empty());
  EXPECT_THAT(tokenizer_->Tokenize("", true, false), ElementsAre(Id("<s>")));
}

TEST_F(SpmFacadeTest, SpecialTokensOnlyWhenParsingSpecial) {
  const std::vector<TokenId> parsed =
      tokenizer_->Tokenize("hi<s>hi", false, /*parse_special=*/true);
  // After a special token the leading-space rule applies again.
  EXPECT_THAT(parsed, ElementsAre(Id(Low("hi")), Id("<s>"), Id(Low("hi"))));
  const std::vector<TokenId> literal =
      tokenizer_->Tokenize("<s>", false, /*parse_special=*/false);
  EXPECT_THAT(literal, ::testing::Not(::testing::Contains(Id("<s>"))));
  EXPECT_EQ(tokenizer_->Detokenize(literal), "<s>");
}

TEST_F(SpmFacadeTest, LongestSpecialTokenWins) {
  EXPECT_THAT(tokenizer_->Tokenize("<|im_start|><|im", false, true),
              ElementsAre(Id("<|im_start|>"), Id("<|im")));
}

TEST_F(SpmFacadeTest, UserDefinedTokensAlwaysMatch) {
  EXPECT_THAT(tokenizer_->Tokenize("<tool>", false, /*parse_special=*/false),
              ElementsAre(Id("<tool>")));
}

TEST_F(SpmFacadeTest, PiecesAndDetokenize) {
  EXPECT_EQ(tokenizer_->TokenToPiece(Id(Low("hi"))), " hi");
  EXPECT_EQ(tokenizer_->TokenToPiece(Id("<s>")), "");
  EXPECT_EQ(tokenizer_->TokenToPiece(Id("<s>"), /*render_special=*/true),
            "<s>");
  EXPECT_EQ(tokenizer_->TokenToPiece(Id("<0x41>")), "A");
  EXPECT_EQ(tokenizer_->TokenToPiece(Id("<tool>")), "<tool>");
  EXPECT_EQ(tokenizer_->TokenToPiece(-1), "");
  EXPECT_EQ(tokenizer_->TokenToPiece(1 << 20), "");
  const std::vector<TokenId> ids =
      tokenizer_->Tokenize("hi there", true, false);
  EXPECT_EQ(tokenizer_->Detokenize(ids), "hi there");
  EXPECT_EQ(tokenizer_->Detokenize(ids, /*remove_special=*/true), "hi there");
  EXPECT_EQ(tokenizer_->Detokenize(ids, false, /*render_special=*/true),
            "<s>hi there");
}

TEST_F(SpmFacadeTest, StreamingHoldsSplitCharacters) {
  // "é" and "😀" are not in the vocabulary: byte fallback splits them.
  const std::vector<TokenId> ids =
      tokenizer_->Tokenize("hi \xC3\xA9\xF0\x9F\x98\x80", false, false);
  StreamingDetokenizer stream(tokenizer_.get());
  std::string out;
  std::vector<size_t> pending;
  for (TokenId id : ids) {
    const std::string part = stream.Push(id);
    EXPECT_TRUE(IsValidUtf8(part)) << testing::PrintToString(part);
    out += part;
    pending.push_back(stream.num_pending_bytes());
  }
  out += stream.Flush();
  // The stream continues a prompt: the first piece keeps its space.
  EXPECT_EQ(out, " hi \xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(tokenizer_->Detokenize(ids), "hi \xC3\xA9\xF0\x9F\x98\x80");
  // ..., <0xC3> (1 held), <0xA9> (0), <0xF0> 1, <0x9F> 2, <0x98> 3, <0x80> 0.
  EXPECT_THAT(std::vector<size_t>(pending.end() - 6, pending.end()),
              ElementsAre(1, 0, 1, 2, 3, 0));
}

TEST_F(SpmFacadeTest, StreamingReplacesBytesThatCannotComplete) {
  StreamingDetokenizer stream(tokenizer_.get());
  EXPECT_EQ(stream.Push(Id("<0xE2>")), "");
  EXPECT_EQ(stream.Push(Id("<0x41>")),
            "\xEF\xBF\xBD"
            "A");  // E2 then 'A'
  EXPECT_EQ(stream.Push(Id("<0xF0>")), "");
  EXPECT_EQ(stream.Push(Id("<0x9F>")), "");
  EXPECT_EQ(stream.Flush(), "\xEF\xBF\xBD");  // one per truncated character
  EXPECT_EQ(stream.num_pending_bytes(), 0u);
  EXPECT_EQ(stream.Push(Id("<0xFF>")), "\xEF\xBF\xBD");
}

// The four shared vocabularies, for edge cases and fuzzing.

class SharedVocabTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = std::string(KVAULT_SOURCE_DIR) +
                             "/../shared/vocab/ggml-vocab-" + GetParam() +
                             ".gguf";
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "shared vocab not found: " << path;
    }
    // Loaded once per vocabulary: building a 50k-token tokenizer is the
    // slowest part of these tests under sanitizers.
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    std::unique_ptr<Tokenizer>& cached = cache[GetParam()];
    if (cached == nullptr) {
      auto gguf = GgufFile::Open(path);
      ASSERT_TRUE(gguf.ok()) << gguf.status();
      auto t = Tokenizer::FromGguf(**gguf);
      ASSERT_TRUE(t.ok()) << t.status();
      cached = std::move(t).value();
    }
    tokenizer_ = cached.get();
  }
  bool IsSpm() const { return tokenizer_->vocab().kind == VocabKind::kSpm; }

  const Tokenizer* tokenizer_ = nullptr;
};

TEST_P(SharedVocabTest, EdgeCasesRoundTrip) {
  for (const std::string& text :
       {std::string(""), std::string(" "), std::string("     "),
        std::string("\n\n\t "), std::string(5000, 'a'),
        std::string("Supercalifragilisticexpialidocious antidisestablishment"),
        std::string("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x87\xAB\xF0\x9F"
                    "\x87\xB7 \xE2\x9D\xA4\xEF\xB8\x8F"),
        std::string("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xD8\xA7\xD9\x84"
                    "\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9")}) {
    SCOPED_TRACE(testing::PrintToString(text));
    const std::vector<TokenId> ids = tokenizer_->Tokenize(text, false, false);
    EXPECT_EQ(ids.empty(), text.empty());
    EXPECT_EQ(tokenizer_->Detokenize(ids), text);
  }
  const std::vector<TokenId> with_bos = tokenizer_->Tokenize("", true, false);
  EXPECT_EQ(with_bos.size(), tokenizer_->vocab().add_bos ? 1u : 0u);
}

TEST_P(SharedVocabTest, InvalidUtf8IsHandled) {
  // No invalid lead byte is followed by a space here: SentencePiece cuts
  // characters by lead byte after spaces became "▁", so a lead byte would
  // swallow part of a "▁" and the space would come back as raw bytes (as in
  // llama.cpp).
  const std::string text =
      "ok\xFF\xFE\xC3z\xE2\x82q\xED\xA0\x80"
      "end\x80";
  const std::vector<TokenId> ids = tokenizer_->Tokenize(text, false, false);
  ASSERT_FALSE(ids.empty());
  // SentencePiece keeps the bytes (byte fallback); byte-level BPE sees
  // llama.cpp's decoding of them (U+FFFD for each bad byte).
  std::string expected = text;
  if (!IsSpm()) {
    expected.clear();
    for (char32_t cp : DecodeUtf8Lenient(text)) AppendUtf8(cp, &expected);
  }
  EXPECT_EQ(tokenizer_->Detokenize(ids), expected);
  // With spaces around bad bytes: no crash, valid ids.
  for (TokenId id : tokenizer_->Tokenize(" \xC3 \xE2 x\xF0 ", true, true)) {
    EXPECT_TRUE(tokenizer_->vocab().Contains(id));
  }
}

TEST_P(SharedVocabTest, ParsesItsControlTokensWhenAsked) {
  const Vocab& v = tokenizer_->vocab();
  ASSERT_TRUE(v.eos.has_value());
  const std::string eos_text = v.tokens[*v.eos];
  const std::vector<TokenId> ids =
      tokenizer_->Tokenize("a" + eos_text + "b", false, true);
  EXPECT_THAT(ids, ::testing::Contains(*v.eos));
  EXPECT_THAT(tokenizer_->Tokenize("a" + eos_text, false, false),
              ::testing::Not(::testing::Contains(*v.eos)));
}

TEST_P(SharedVocabTest, RandomBytesNeverCrash) {
  const uint32_t seed = 12345;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    for (bool special : {false, true}) {
      const std::vector<TokenId> ids =
          tokenizer_->Tokenize(text, true, special);
      StreamingDetokenizer stream(tokenizer_, /*render_special=*/true);
      std::string streamed;
      for (TokenId id : ids) {
        ASSERT_TRUE(tokenizer_->vocab().Contains(id));
        streamed += stream.Push(id);
      }
      streamed += stream.Flush();
      EXPECT_TRUE(IsValidUtf8(streamed));
      std::string pieces;
      for (TokenId id : ids) pieces += tokenizer_->TokenToPiece(id, true);
      EXPECT_EQ(streamed, SanitizeUtf8(pieces));
    }
  }
}

TEST_P(SharedVocabTest, HundredKilobytesRoundTrip) {
  std::string text;
  const char* sentences[] = {
      "The quick brown fox jumps over the lazy dog. ",
      "Once upon a time, there was a little girl named Lily.\n",
      "int main(int argc, char** argv) { return 42; }\n",
      "\xC3\x84pfel und Birnen kosten 3,50 \xE2\x82\xAC. ",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80"
      "\x82"};
  for (size_t i = 0; text.size() < 100 * 1024; ++i) text += sentences[i % 5];
  const std::vector<TokenId> ids = tokenizer_->Tokenize(text, true, true);
  EXPECT_GT(ids.size(), 10000u);
  EXPECT_EQ(tokenizer_->Detokenize(ids, /*remove_special=*/true), text);
}

INSTANTIATE_TEST_SUITE_P(SharedVocab, SharedVocabTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2",
                                           "starcoder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// llama-server's recorded prompts (with BOS) and generated text for the
// shared models: the prompt ids must match, and streaming the generated ids
// must give the recorded text.
class GoldenModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModelTest, PromptIdsAndGeneratedText) {
  const std::string shared = std::string(KVAULT_SOURCE_DIR) + "/../shared/";
  const std::string model = shared + "models/" + GetParam() + ".gguf";
  const std::string golden = shared + "golden/" + GetParam() + ".json";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(golden)) {
    GTEST_SKIP() << "shared model or golden file not found: " << model;
  }
  auto gguf = GgufFile::Open(model);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tokenizer = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const nlohmann::json cases =
      nlohmann::json::parse(std::ifstream(golden))["cases"];
  ASSERT_FALSE(cases.empty());
  for (const nlohmann::json& c : cases) {
    const std::string prompt = c["prompt"];
    SCOPED_TRACE(prompt);
    EXPECT_EQ((*tokenizer)->Tokenize(prompt, /*add_special=*/true, false),
              c["prompt_ids"].get<std::vector<TokenId>>());
    StreamingDetokenizer stream(tokenizer->get());
    std::string text;
    for (TokenId id : c["gen_ids"].get<std::vector<TokenId>>()) {
      text += stream.Push(id);
    }
    text += stream.Flush();
    EXPECT_EQ(text, c["text"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, GoldenModelTest,
                         ::testing::Values("stories260K", "tiny-random-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kvault
