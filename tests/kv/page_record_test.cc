#include "kv/page_record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/memory_file.h"
#include "core/reasons.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::MakeCache;
using state_test::SmallLayout;

constexpr SeqId kSeq(1);
constexpr SeqId kBack(2);

class PageRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = MakeCache(SmallLayout(), /*num_pages=*/16, /*page_size=*/8);
    AppendRandom(cache_.get(), kSeq, 20, /*seed=*/7);  // 2 full pages
    snap_ = TakeSaveSnapshot(*cache_, kSeq, kTestFingerprint).value();
    root_ = ChainRoot(kTestFingerprint, SmallLayout(), 8, 0);
    keys_ = PageKeyChain(root_, snap_.tokens, 8);
  }
  // The record of page `i`.
  std::shared_ptr<std::string> Record(size_t i) {
    auto bytes = std::make_shared<std::string>();
    StringWritableFile out(bytes.get());
    const PageKey parent = i == 0 ? root_ : keys_[i - 1];
    StatusOr<uint64_t> n = WritePageRecord(
        *cache_->storage(), PageSnapshot(snap_, i), keys_[i], parent, {}, &out);
    EXPECT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, bytes->size());
    return bytes;
  }
  // Opens record `bytes` as page `i` and restores it into kBack.
  StatusOr<RestoreResult> Load(std::shared_ptr<std::string> bytes, size_t i) {
    StringRandomAccessFile file(bytes);
    KV_ASSIGN_OR_RETURN(
        std::unique_ptr<RandomAccessFile> state,
        OpenPageRecord(file, keys_[i], i == 0 ? root_ : keys_[i - 1]));
    return RestoreSequence(*state, kTestFingerprint, kBack, cache_.get());
  }

  std::unique_ptr<KvCache> cache_;
  SaveSnapshot snap_;
  PageKey root_;
  std::vector<PageKey> keys_;
};

TEST_F(PageRecordTest, HeaderRoundTrips) {
  const PageRecordHeader h{PageKey{1, 2}, PageKey{3, 4}, 999};
  const auto bytes = EncodePageRecordHeader(h);
  EXPECT_EQ(std::memcmp(bytes.data(), "KVPAGE01", 8), 0);
  EXPECT_EQ(DecodePageRecordHeader(bytes).value(), h);
}

// A record holds exactly its page: restored, the cells are the page's
// tokens and positions with the same K/V bytes.
TEST_F(PageRecordTest, RecordRestoresThePageCellsAndBytes) {
  ASSERT_EQ(keys_.size(), 2u);
  StatusOr<RestoreResult> r = Load(Record(1), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 8u);
  const auto cells = cache_->table().Cells(kBack);
  ASSERT_EQ(cells.size(), 8u);
  EXPECT_EQ(cells[0], snap_.tokens[8]);
  EXPECT_EQ(cells[7].pos, 15);
  const KvStorage& s = *cache_->storage();
  for (uint64_t i = 0; i < 8; ++i) {
    const CellId from = cache_->table().CellAt(kSeq, 8 + i);
    const CellId to = cache_->table().CellAt(kBack, i);
    for (uint32_t layer = 0; layer < 2; ++layer) {
      auto a = s.Rows(KvSide::kK, layer, from),
           b = s.Rows(KvSide::kK, layer, to);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
      auto c = s.Rows(KvSide::kV, layer, from),
           d = s.Rows(KvSide::kV, layer, to);
      EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size()), 0);
    }
  }
}

TEST_F(PageRecordTest, ARecordOfAnotherPageOrParentIsRefused) {
  auto bytes = Record(0);
  StringRandomAccessFile file(bytes);
  StatusOr<std::unique_ptr<RandomAccessFile>> wrong_key =
      OpenPageRecord(file, keys_[1], root_);
  EXPECT_EQ(wrong_key.status().reason(), kReasonBadHeader);
  EXPECT_NE(wrong_key.status().message().find(keys_[0].ToHex()),
            std::string::npos);
  EXPECT_EQ(OpenPageRecord(file, keys_[0], keys_[1]).status().reason(),
            kReasonBadHeader);
  EXPECT_TRUE(OpenPageRecord(file, keys_[0], root_).ok());
}

// Every damage is detected before any cell changes: a flipped bit anywhere
// (header or embedded state), a cut, extra bytes.
TEST_F(PageRecordTest, DamagedRecordsAreDetected) {
  const auto good = Record(0);
  for (size_t at : {size_t{3}, size_t{20}, size_t{50}, size_t{70},
                    good->size() / 2, good->size() - 3}) {
    auto bad = std::make_shared<std::string>(*good);
    (*bad)[at] ^= 0x10;
    StatusOr<RestoreResult> r = Load(bad, 0);
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << "byte " << at;
    EXPECT_FALSE(cache_->table().Contains(kBack));
  }
  auto cut = std::make_shared<std::string>(good->substr(0, good->size() - 1));
  EXPECT_EQ(Load(cut, 0).status().reason(), kReasonTruncated);
  auto longer = std::make_shared<std::string>(*good + "x");
  EXPECT_EQ(Load(longer, 0).status().reason(), kReasonTrailingBytes);
  auto tiny = std::make_shared<std::string>(good->substr(0, 10));
  EXPECT_EQ(Load(tiny, 0).status().reason(), kReasonTruncated);
  EXPECT_TRUE(Load(good, 0).ok());
}

// The filled part of the last page (cells 16..19) is a tail record; an
// empty page, or more cells than a page holds, is refused.
TEST_F(PageRecordTest, TailsAreWrittenButNotEmptyOrOverfullPages) {
  const PageKey tail_key = TailKey(keys_[1]);
  EXPECT_NE(tail_key, NextPageKey(keys_[1], std::span(snap_.tokens).last(4)));
  const SaveSnapshot tail = PageSnapshot(snap_, 2);
  ASSERT_EQ(tail.tokens.size(), 4u);
  std::string bytes;
  StringWritableFile out(&bytes);
  ASSERT_TRUE(
      WritePageRecord(*cache_->storage(), tail, tail_key, keys_[1], {}, &out)
          .ok());
  StringRandomAccessFile file(std::make_shared<const std::string>(bytes));
  auto state = OpenPageRecord(file, tail_key, keys_[1]);
  ASSERT_TRUE(state.ok()) << state.status();
  auto restored =
      RestoreSequence(**state, kTestFingerprint, kBack, cache_.get());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(std::ranges::equal(cache_->table().Cells(kBack),
                                 std::span(snap_.tokens).last(4)));

  SaveSnapshot empty = tail;
  empty.tokens.clear();
  SaveSnapshot overfull = PageSnapshot(snap_, 0);
  overfull.tokens.push_back(overfull.tokens.back());
  for (const SaveSnapshot& bad : {empty, overfull}) {
    std::string ignored;
    StringWritableFile sink(&ignored);
    EXPECT_EQ(
        WritePageRecord(*cache_->storage(), bad, keys_[0], root_, {}, &sink)
            .status()
            .code(),
        StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kvault
