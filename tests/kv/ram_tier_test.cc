// RamTier: put/open/remove, byte budget, LRU order, atomic Put.
#include "kv/ram_tier.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/memory_file.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

constexpr ModelFingerprint kModel{0x1234, 0x5678};

// A small cache (2 layers x 2 KV heads x 32 dims f16) holding sequences of
// random K/V bytes, whose state files the tests put into the tier.
class RamTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KvCacheOptions o;
    o.num_pages = 32;
    o.page_size = 4;
    o.layout = KvLayout{2, 2, 32, 32, KvDtype::kF16};
    auto cache = KvCache::Create(o);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(cache).value();
  }

  // Appends `num_tokens` tokens of random K/V bytes to `seq`.
  void Fill(SeqId seq, int num_tokens) {
    std::vector<TokenPos> tokens;
    for (int i = 0; i < num_tokens; ++i) tokens.push_back({1000 + i, i});
    auto cells = cache_->Append(seq, tokens);
    ASSERT_TRUE(cells.ok()) << cells.status();
    std::mt19937 rng(seq.value());
    for (CellId cell : *cells) {
      for (uint32_t layer = 0; layer < 2; ++layer) {
        for (std::byte& b : cache_->storage()->Rows(KvSide::kK, layer, cell))
          b = std::byte(rng());
        for (std::byte& b : cache_->storage()->Rows(KvSide::kV, layer, cell))
          b = std::byte(rng());
      }
    }
  }

  // Returns a write function producing `seq`'s state file.
  SpillWriteFn Writer(SeqId seq) {
    return [this, seq](WritableFile* out) {
      return WriteSequenceState(*cache_, seq, kModel, SaveOptions{}, out);
    };
  }

  // Returns `seq`'s state file as bytes.
  std::string StateOf(SeqId seq) {
    std::string bytes;
    StringWritableFile file(&bytes);
    auto n = WriteSequenceState(*cache_, seq, kModel, SaveOptions{}, &file);
    EXPECT_TRUE(n.ok()) << n.status();
    return bytes;
  }

  // Returns every byte `file` holds.
  static std::string ReadAll(const RandomAccessFile& file) {
    std::string out(file.size(), '\0');
    auto n = file.ReadAt(0, std::as_writable_bytes(std::span(out)));
    EXPECT_TRUE(n.ok() && *n == out.size());
    return out;
  }

  std::unique_ptr<KvCache> cache_;
};

TEST_F(RamTierTest, PutOpenRemove) {
  Fill(SeqId(1), 10);
  const std::string state = StateOf(SeqId(1));
  RamTier tier(1 << 20);
  EXPECT_EQ(tier.name(), "ram");
  auto info = tier.Put(SeqId(1), 7, Writer(SeqId(1)));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_bytes, state.size());
  EXPECT_EQ(info->num_tokens, 10u);
  EXPECT_EQ(info->last_use, 7u);
  EXPECT_TRUE(tier.Contains(SeqId(1)));
  EXPECT_EQ(tier.used_bytes(), state.size());
  auto file = tier.Open(SeqId(1));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ReadAll(**file), state);
  ASSERT_TRUE(tier.Remove(SeqId(1)).ok());
  EXPECT_FALSE(tier.Contains(SeqId(1)));
  EXPECT_EQ(tier.used_bytes(), 0u);
  // An open reader keeps the removed entry's bytes alive.
  EXPECT_EQ(ReadAll(**file), state);
  EXPECT_TRUE(tier.Open(SeqId(1)).status().IsNotFound());
  EXPECT_TRUE(tier.Remove(SeqId(1)).ok());  // absent: no-op
}

TEST_F(RamTierTest, BudgetIsNeverExceeded) {
  Fill(SeqId(1), 8);
  Fill(SeqId(2), 8);
  Fill(SeqId(3), 12);
  const uint64_t size8 = StateOf(SeqId(1)).size();
  RamTier tier(2 * size8);
  ASSERT_TRUE(tier.Put(SeqId(1), 1, Writer(SeqId(1))).ok());
  ASSERT_TRUE(tier.Put(SeqId(2), 2, Writer(SeqId(2))).ok());
  auto over = tier.Put(SeqId(3), 3, Writer(SeqId(3)));
  EXPECT_TRUE(over.status().IsResourceExhausted()) << over.status();
  EXPECT_FALSE(tier.Contains(SeqId(3)));
  EXPECT_EQ(tier.used_bytes(), 2 * size8);
  // Replacing an entry counts only the difference: seq 2 grows by 4 tokens,
  // which no longer fits next to seq 1, and the old entry stays.
  Fill(SeqId(2), 4);
  auto grown = tier.Put(SeqId(2), 4, Writer(SeqId(2)));
  EXPECT_TRUE(grown.status().IsResourceExhausted()) << grown.status();
  ASSERT_TRUE(tier.Contains(SeqId(2)));
  EXPECT_EQ(tier.Entries()[1].num_tokens, 8u);
  // After seq 1 goes, the larger replacement fits.
  ASSERT_TRUE(tier.Remove(SeqId(1)).ok());
  auto replaced = tier.Put(SeqId(2), 4, Writer(SeqId(2)));
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->num_tokens, 12u);
  EXPECT_EQ(tier.used_bytes(), replaced->num_bytes);
}

TEST_F(RamTierTest, EntriesAreLeastRecentlyUsedFirstTiesBySeq) {
  RamTier tier(1 << 20);
  for (uint32_t s : {4, 2, 9, 5}) Fill(SeqId(s), 3);
  ASSERT_TRUE(tier.Put(SeqId(4), 30, Writer(SeqId(4))).ok());
  ASSERT_TRUE(tier.Put(SeqId(2), 20, Writer(SeqId(2))).ok());
  ASSERT_TRUE(tier.Put(SeqId(9), 10, Writer(SeqId(9))).ok());
  ASSERT_TRUE(tier.Put(SeqId(5), 20, Writer(SeqId(5))).ok());
  std::vector<uint32_t> order;
  for (const SpillEntryInfo& e : tier.Entries()) order.push_back(e.seq.value());
  EXPECT_EQ(order, (std::vector<uint32_t>{9, 2, 5, 4}));
}

TEST_F(RamTierTest, FailedWriterStoresNothingAndKeepsOlderEntry) {
  Fill(SeqId(1), 5);
  const std::string state = StateOf(SeqId(1));
  RamTier tier(1 << 20);
  ASSERT_TRUE(tier.Put(SeqId(1), 1, Writer(SeqId(1))).ok());
  auto failed =
      tier.Put(SeqId(1), 2, [](WritableFile* out) -> StatusOr<uint64_t> {
        EXPECT_TRUE(out->Append(std::string_view("partial")).ok());
        return IOError("injected");
      });
  EXPECT_TRUE(failed.status().IsIOError()) << failed.status();
  EXPECT_EQ(tier.used_bytes(), state.size());
  auto file = tier.Open(SeqId(1));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadAll(**file), state);
  EXPECT_EQ(tier.Entries()[0].last_use, 1u);
}

TEST_F(RamTierTest, InvalidStateIsRejected) {
  Fill(SeqId(1), 5);
  std::string state = StateOf(SeqId(1));
  RamTier tier(1 << 20);
  // A writer that drops the trailer: the header implies more bytes.
  auto truncated =
      tier.Put(SeqId(1), 1, [&](WritableFile* out) -> StatusOr<uint64_t> {
        KV_RETURN_IF_ERROR(
            out->Append(std::string_view(state).substr(0, state.size() - 24)));
        return state.size() - 24;
      });
  EXPECT_TRUE(truncated.status().IsCorruption()) << truncated.status();
  EXPECT_EQ(truncated.status().reason(), kReasonTruncated);
  EXPECT_FALSE(tier.Contains(SeqId(1)));
  EXPECT_EQ(tier.used_bytes(), 0u);
}

}  // namespace
}  // namespace kvault
