// Slot files: llama.cpp's token header in front of a kvault state file. A
// saved file reads back through its header in both token forms (packed, and
// the plain list older llama-servers wrote), restores as the bare state
// would, and every way the header can be wrong is its own precise error —
// including a header whose tokens are not the state's, and a llama.cpp
// file whose KV data kvault cannot read.
#include "kv/slot_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "core/reasons.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::SaveToString;
using state_test::SequenceBytes;
using state_test::SmallLayout;

constexpr uint64_t kNumTokens = 21;

void PutLe32(std::string* s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[at + i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetLe32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  }
  return v;
}

class SlotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = state_test::MakeCache(SmallLayout(), 32, 4);
    AppendRandom(cache_.get(), SeqId(1), kNumTokens, 7);
    SaveOptions options;
    options.llama_token_header = true;
    ASSERT_TRUE(SaveSequenceToFile(&env_, *cache_, SeqId(1), kTestFingerprint,
                                   kPath, options)
                    .ok());
    auto bytes = ReadFileToString(&env_, kPath);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    file_ = std::move(bytes).value();
    state_ = SaveToString(*cache_, SeqId(1));
  }

  // The file with its packed payload rewritten as a plain token list, as
  // llama.cpp's server test does.
  std::string LegacyForm() const {
    std::string out = file_.substr(0, 12);
    out += file_.substr(24, 4 * kNumTokens);
    PutLe32(&out, 8, kNumTokens);
    return out + state_;
  }

  // Restores `bytes` into seq 2 of the cache; returns the restore's status.
  Status Restore(const std::string& bytes) {
    EXPECT_TRUE(
        WriteStringToFile(&env_, bytes, "/other.bin", /*sync=*/false).ok());
    auto file = OpenSlotFile(&env_, "/other.bin");
    if (!file.ok()) return file.status();
    EXPECT_EQ(file->header_bytes + file->state->size(), bytes.size());
    return RestoreSequence(*file->state, kTestFingerprint, SeqId(2),
                           cache_.get())
        .status();
  }

  static constexpr char kPath[] = "/slot.bin";
  FaultInjectingEnv env_;
  std::unique_ptr<KvCache> cache_;
  std::string file_;   // the slot file
  std::string state_;  // the bare state file of the same sequence
};

TEST_F(SlotFileTest, SavedFileIsTheTokenHeaderThenTheStateFile) {
  const size_t header_bytes = 12 + 4 * (4 + kNumTokens);
  ASSERT_EQ(file_.size(), header_bytes + state_.size());
  EXPECT_EQ(file_.substr(header_bytes), state_);
  EXPECT_EQ(GetLe32(file_, 0), kLlamaSeqMagic);
  EXPECT_EQ(GetLe32(file_, 4), kLlamaSeqVersion);
  EXPECT_EQ(GetLe32(file_, 8), 4 + kNumTokens);  // payload words
  EXPECT_EQ(GetLe32(file_, 12), kPackedTokensMarker);
  EXPECT_EQ(GetLe32(file_, 20), kNumTokens);
  const std::span<const TokenPos> tokens = cache_->table().Cells(SeqId(1));
  for (size_t i = 0; i < kNumTokens; ++i) {
    EXPECT_EQ(static_cast<TokenId>(GetLe32(file_, 24 + 4 * i)),
              tokens[i].token);
  }
  EXPECT_EQ(GetLe32(file_, 24 + 4 * kNumTokens), 0u);  // no media
}

TEST_F(SlotFileTest, PackedAndPlainTokenListsReadAndRestoreAlike) {
  for (const std::string& bytes : {file_, LegacyForm(), state_}) {
    auto header = ReadSlotFileHeader(*state_test::StringFile(bytes));
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->body_offset, bytes.size() - state_.size());
    ASSERT_TRUE(Restore(bytes).ok()) << Restore(bytes);
    EXPECT_EQ(SequenceBytes(*cache_, SeqId(2)),
              SequenceBytes(*cache_, SeqId(1)));
    const auto a = cache_->table().Cells(SeqId(1));
    const auto b = cache_->table().Cells(SeqId(2));
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  EXPECT_TRUE(ReadSlotFileHeader(*state_test::StringFile(file_))->packed);
  auto legacy = ReadSlotFileHeader(*state_test::StringFile(LegacyForm()));
  EXPECT_FALSE(legacy->packed);
  EXPECT_EQ(legacy->tokens.size(), kNumTokens);
}

TEST_F(SlotFileTest, HeaderTokensThatAreNotTheStatesAreRefused) {
  std::string changed = file_;
  PutLe32(&changed, 24 + 4 * 5, GetLe32(changed, 24 + 4 * 5) + 1);
  Status s = Restore(changed);
  EXPECT_TRUE(s.IsCorruption()) << s;
  EXPECT_EQ(s.reason(), kReasonBadHeader);
  EXPECT_NE(s.message().find("token 5"), std::string::npos) << s;
  std::string shorter = LegacyForm();  // drop the last listed token
  shorter.erase(12 + 4 * (kNumTokens - 1), 4);
  PutLe32(&shorter, 8, kNumTokens - 1);
  s = Restore(shorter);
  EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
  EXPECT_FALSE(cache_->table().Contains(SeqId(2)));
}

TEST_F(SlotFileTest, MalformedHeadersAreEachTheirOwnError) {
  struct Case {
    size_t at;
    uint32_t value;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {4, 3, kReasonVersionUnsupported},           // another version
      {8, 1u << 30, kReasonBadHeader},             // absurd word count
      {8, 1u << 20, kReasonTruncated},             // more words than the file
      {20, kNumTokens + 9, kReasonBadHeader},      // packed count too large
      {24 + 4 * kNumTokens, 2, kReasonBadHeader},  // two media chunks
  };
  for (const Case& c : cases) {
    std::string bytes = file_;
    PutLe32(&bytes, c.at, c.value);
    Status s = Restore(bytes);
    EXPECT_EQ(s.reason(), c.reason) << "word at " << c.at << ": " << s;
  }
  EXPECT_EQ(Restore(file_.substr(0, 10)).reason(), kReasonTruncated);
  EXPECT_FALSE(cache_->table().Contains(SeqId(2)));
}

TEST_F(SlotFileTest, LlamaCppKvDataIsRefusedByName) {
  std::string llama = file_.substr(0, file_.size() - state_.size());
  llama += std::string(4096, '\x5a');  // llama.cpp's own KV layout
  Status s = Restore(llama);
  EXPECT_EQ(s.reason(), kReasonBadMagic) << s;
  EXPECT_NE(s.message().find("llama.cpp"), std::string::npos) << s;
}

TEST_F(SlotFileTest, DamageInTheStateBehindTheHeaderIsTheStatesError) {
  std::string bytes = file_;
  bytes[bytes.size() - state_.size() / 2] ^= 0x10;  // inside a chunk
  Status s = Restore(bytes);
  EXPECT_EQ(s.reason(), kReasonChecksumMismatch) << s;
  EXPECT_FALSE(cache_->table().Contains(SeqId(2)));
}

}  // namespace
}  // namespace kvault
