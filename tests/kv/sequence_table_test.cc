#include "kv/sequence_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <vector>

#include "kv/pool_stats.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr Pos kMaxPos = std::numeric_limits<Pos>::max();
constexpr Pos kMinPos = std::numeric_limits<Pos>::min();
const SeqId kA(0);
const SeqId kB(1);
const SeqId kC(2);
const SeqId kD(3);

// Tokens with positions [begin, end) and token id 1000 + pos % 10000.
std::vector<TokenPos> Tokens(Pos begin, Pos end) {
  std::vector<TokenPos> out;
  for (Pos p = begin; p < end; ++p) out.push_back(TokenPos{1000 + p % 10000, p});
  return out;
}

std::vector<Pos> Positions(std::span<const TokenPos> cells) {
  std::vector<Pos> out;
  for (const TokenPos& c : cells) out.push_back(c.pos);
  return out;
}

std::vector<PageId> Ids(std::initializer_list<uint32_t> values) {
  std::vector<PageId> ids;
  for (uint32_t v : values) ids.push_back(PageId(v));
  return ids;
}

std::vector<CellId> CellIds(std::initializer_list<uint64_t> values) {
  std::vector<CellId> ids;
  for (uint64_t v : values) ids.push_back(CellId(v));
  return ids;
}

CellMove Move(uint64_t src, uint64_t dst, uint64_t count) {
  return CellMove{CellId(src), CellId(dst), count};
}

std::vector<PageId> ToVector(std::span<const PageId> pages) {
  return std::vector<PageId>(pages.begin(), pages.end());
}

// A pool of `num_pages` pages of 4 cells and a table using `policy_name`.
class SequenceTableTest : public ::testing::Test {
 protected:
  void Init(uint32_t num_pages, uint32_t page_size = 4,
            const char* policy_name = "paged") {
    table_.reset();
    pool_ = std::make_unique<PagePool>(
        std::move(PagePool::Create(num_pages, page_size)).value());
    policy_ = std::move(MakeAllocationPolicy(policy_name)).value();
    table_ = std::make_unique<SequenceTable>(pool_.get(), policy_.get());
  }
  void SetUp() override { Init(8); }
  void TearDown() override {
    if (table_ != nullptr) {
      EXPECT_TRUE(CheckInvariants(*table_).ok()) << CheckInvariants(*table_);
    }
  }

  AppendResult MustAppend(SeqId seq, Pos begin, Pos end) {
    StatusOr<AppendResult> r = table_->Append(seq, Tokens(begin, end));
    KV_CHECK(r.ok()) << r.status();
    KV_CHECK_OK(CheckInvariants(*table_));
    return std::move(r).value();
  }
  CellMoves MustRemove(SeqId seq, Pos p0, Pos p1) {
    StatusOr<CellMoves> r = table_->RemoveRange(seq, p0, p1);
    KV_CHECK(r.ok()) << r.status();
    KV_CHECK_OK(CheckInvariants(*table_));
    return std::move(r).value();
  }
  uint32_t Refs(uint32_t page) { return pool_->RefCount(PageId(page)); }

  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<AllocationPolicy> policy_;
  std::unique_ptr<SequenceTable> table_;
};

TEST_F(SequenceTableTest, AppendCreatesSequenceAndReturnsCells) {
  AppendResult r = MustAppend(kA, 0, 6);
  EXPECT_TRUE(r.cow_moves.empty());
  EXPECT_EQ(r.cells, CellIds({0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(table_->Contains(kA));
  EXPECT_EQ(table_->Length(kA), 6u);
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1}));
  EXPECT_EQ(table_->Cells(kA)[5], (TokenPos{1005, 5}));
  EXPECT_EQ(table_->CellAt(kA, 5), CellId(5));
  r = MustAppend(kA, 6, 9);  // fills page 1, then opens page 2
  EXPECT_EQ(r.cells, CellIds({6, 7, 8}));
  EXPECT_EQ(pool_->num_free_pages(), 5u);
  EXPECT_EQ(table_->num_used_cells(), 9u);
}

TEST_F(SequenceTableTest, AppendOfNothingCreatesEmptySequence) {
  AppendResult r = MustAppend(kB, 0, 0);
  EXPECT_TRUE(r.cells.empty());
  EXPECT_TRUE(table_->Contains(kB));
  EXPECT_EQ(table_->Length(kB), 0u);
  EXPECT_TRUE(table_->Pages(kB).empty());
}

TEST_F(SequenceTableTest, UnknownSequenceQueries) {
  EXPECT_FALSE(table_->Contains(kC));
  EXPECT_EQ(table_->Length(kC), 0u);
  EXPECT_TRUE(table_->Pages(kC).empty());
  EXPECT_TRUE(table_->Cells(kC).empty());
  EXPECT_DEATH(table_->CellAt(kC, 0), "CellAt on unknown seq#2");
  MustAppend(kC, 0, 2);
  EXPECT_DEATH(table_->CellAt(kC, 2), "CellAt past the end of seq#2");
}

TEST_F(SequenceTableTest, AppendFailsAtomicallyWhenPoolIsFull) {
  MustAppend(kA, 0, 26);  // 7 of 8 pages, tail has 2 free cells
  EXPECT_TRUE(table_->CanAppend(kA, 6));
  EXPECT_FALSE(table_->CanAppend(kA, 7));
  StatusOr<AppendResult> r = table_->Append(kB, Tokens(0, 9));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "Append to seq#1: need 3 pages, 1 free");
  EXPECT_FALSE(table_->Contains(kB));  // not even created
  EXPECT_EQ(pool_->num_free_pages(), 1u);
  EXPECT_FALSE(table_->CanAppend(kA, std::numeric_limits<uint64_t>::max()));
}

TEST_F(SequenceTableTest, ContiguousFailsOnFragmentedSpaceWherePagedSucceeds) {
  for (const char* policy : {"contiguous", "paged"}) {
    Init(6, 2, policy);
    for (uint32_t s = 0; s < 4; ++s) MustAppend(SeqId(s), 0, 2);
    table_->RemoveSequence(SeqId(1));
    table_->RemoveSequence(SeqId(3));  // free: page 1, pages 3..5
    StatusOr<AppendResult> r = table_->Append(SeqId(9), Tokens(0, 8));
    if (std::string(policy) == "paged") {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(pool_->num_free_pages(), 0u);
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(),
              "Append to seq#9: no run of 4 free pages; largest free run is 3");
    EXPECT_FALSE(table_->CanAppend(SeqId(9), 8));
    EXPECT_TRUE(table_->CanAppend(SeqId(9), 6));
    r = table_->Append(SeqId(9), Tokens(0, 6));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(ToVector(table_->Pages(SeqId(9))), Ids({3, 4, 5}));
  }
}

TEST_F(SequenceTableTest, CopySharesPagesAndSourceAppendCopiesOnWrite) {
  MustAppend(kA, 0, 6);  // pages 0, 1 (tail holds 2)
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0, 1}));
  EXPECT_EQ(Refs(0), 2u);
  EXPECT_EQ(Refs(1), 2u);
  EXPECT_EQ(table_->num_used_cells(), 6u);
  AppendResult r = MustAppend(kA, 6, 7);
  EXPECT_THAT(r.cow_moves, ElementsAre(Move(4, 8, 2)));
  EXPECT_EQ(r.cells, CellIds({10}));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 2}));
  EXPECT_EQ(Refs(1), 1u);
  // B owns page 1 alone now: no second copy.
  r = MustAppend(kB, 6, 7);
  EXPECT_TRUE(r.cow_moves.empty());
  EXPECT_EQ(r.cells, CellIds({6}));
  EXPECT_EQ(table_->num_used_cells(), 10u);
}

TEST_F(SequenceTableTest, CopyAppendCopiesOnWrite) {
  MustAppend(kA, 0, 5);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  AppendResult r = MustAppend(kB, 5, 10);
  EXPECT_THAT(r.cow_moves, ElementsAre(Move(4, 8, 1)));
  EXPECT_EQ(r.cells, CellIds({9, 10, 11, 12, 13}));
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0, 2, 3}));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1}));
  EXPECT_EQ(table_->Length(kA), 5u);
}

TEST_F(SequenceTableTest, SharedFullTailNeedsNoCopy) {
  MustAppend(kA, 0, 8);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  AppendResult r = MustAppend(kA, 8, 9);
  EXPECT_TRUE(r.cow_moves.empty());
  EXPECT_EQ(r.cells, CellIds({8}));
  EXPECT_EQ(Refs(1), 2u);
}

TEST_F(SequenceTableTest, CopyOnWriteFailureChangesNothing) {
  Init(2);
  MustAppend(kA, 0, 5);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  StatusOr<AppendResult> r = table_->Append(kB, Tokens(5, 6));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "Append to seq#1: need 1 pages, 0 free");
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0, 1}));
  EXPECT_EQ(Refs(1), 2u);
}

TEST_F(SequenceTableTest, RemoveMiddleOfExclusivePagesShiftsDown) {
  MustAppend(kA, 0, 10);  // cells 0..9 in pages 0, 1, 2
  CellMoves moves = MustRemove(kA, 1, 3);
  EXPECT_THAT(moves, ElementsAre(Move(3, 1, 2), Move(5, 3, 2), Move(7, 5, 2),
                                 Move(9, 7, 1)));
  EXPECT_THAT(Positions(table_->Cells(kA)),
              ElementsAre(0, 3, 4, 5, 6, 7, 8, 9));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1}));
  EXPECT_TRUE(pool_->IsFree(PageId(2)));
}

TEST_F(SequenceTableTest, MovesNeverOverlapWithinOneMove) {
  MustAppend(kA, 0, 12);
  CellMoves moves = MustRemove(kA, 0, 1);  // shift everything by one
  ASSERT_EQ(moves.size(), 11u);
  for (const CellMove& m : moves) EXPECT_EQ(m.count, 1u);
  moves = MustRemove(kA, 1, 6);  // shift by five: runs of up to five cells
  EXPECT_THAT(moves, ElementsAre(Move(5, 0, 5), Move(10, 5, 1)));
}

TEST_F(SequenceTableTest, PureTruncationMovesNothing) {
  MustAppend(kA, 0, 10);
  CellMoves moves = MustRemove(kA, 5, kMaxPos);
  EXPECT_TRUE(moves.empty());
  EXPECT_EQ(table_->Length(kA), 5u);
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1}));
  EXPECT_EQ(pool_->num_free_pages(), 6u);
  EXPECT_TRUE(MustRemove(kA, kMinPos, kMaxPos).empty());
  EXPECT_TRUE(table_->Contains(kA));
  EXPECT_EQ(table_->Length(kA), 0u);
  EXPECT_EQ(pool_->num_free_pages(), 8u);
}

TEST_F(SequenceTableTest, RemoveRangeNoOps) {
  MustAppend(kA, 0, 6);
  EXPECT_TRUE(MustRemove(kD, 0, kMaxPos).empty());  // unknown sequence
  EXPECT_FALSE(table_->Contains(kD));
  EXPECT_TRUE(MustRemove(kA, 3, 3).empty());      // empty range
  EXPECT_TRUE(MustRemove(kA, 100, 200).empty());  // nothing in range
  EXPECT_EQ(table_->Length(kA), 6u);
  StatusOr<CellMoves> bad = table_->RemoveRange(kA, 4, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "RemoveRange on seq#0: p0 4 > p1 2");
}

TEST_F(SequenceTableTest, RemoveInMiddleOfSharedPagesCopiesThemFirst) {
  MustAppend(kA, 0, 10);  // pages 0, 1, 2
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  CellMoves moves = MustRemove(kA, 1, 3);
  // Pages 0 and 1 are rewritten and shared: A gets fresh pages 3 and 4 and
  // every kept cell (even cell 0) is copied there. Page 2 is just dropped.
  EXPECT_THAT(moves, ElementsAre(Move(0, 12, 1), Move(3, 13, 7)));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({3, 4}));
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0, 1, 2}));
  EXPECT_EQ(Refs(0), 1u);
  EXPECT_EQ(Refs(2), 1u);
  EXPECT_THAT(Positions(table_->Cells(kB)),
              ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST_F(SequenceTableTest, RemoveCopiesOnlyTheSharedPagesItWrites) {
  MustAppend(kA, 0, 6);  // pages 0, 1
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  MustAppend(kA, 6, 12);  // A: 0, 2 (CoW of 1), 3
  CellMoves moves = MustRemove(kA, 5, 6);
  // Page 0 is shared but untouched; pages 2 and 3 are A's own.
  EXPECT_THAT(moves,
              ElementsAre(Move(10, 9, 1), Move(11, 10, 1), Move(12, 11, 1),
                          Move(13, 12, 1), Move(14, 13, 1), Move(15, 14, 1)));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 2, 3}));
}

TEST_F(SequenceTableTest, RemoveCopyOnWriteFailureChangesNothing) {
  Init(3);
  MustAppend(kA, 0, 12);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  StatusOr<CellMoves> r = table_->RemoveRange(kA, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "RemoveRange on seq#0: copy-on-write: need 3 pages, 0 free");
  EXPECT_EQ(table_->Length(kA), 12u);
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1, 2}));
  // Truncating a shared sequence needs no copy and so still works.
  EXPECT_TRUE(MustRemove(kA, 2, kMaxPos).empty());
  EXPECT_EQ(Refs(0), 2u);
}

TEST_F(SequenceTableTest, CopySequenceReplacesDestinationAndValidates) {
  MustAppend(kA, 0, 3);
  MustAppend(kB, 0, 9);  // pages 1, 2, 3
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0}));
  EXPECT_EQ(pool_->num_free_pages(), 7u);
  Status missing = table_->CopySequence(kD, kA);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "CopySequence: source seq#3 does not exist");
  EXPECT_TRUE(table_->CopySequence(kA, kA).ok());
  EXPECT_EQ(Refs(0), 2u);
}

// A prefix copy shares the pages holding the prefix; a partly used shared
// tail page is copied on the destination's first append, and the source's
// later pages stay its own.
TEST_F(SequenceTableTest, CopySequencePrefixSharesItsPagesOnly) {
  MustAppend(kA, 0, 10);  // pages 0, 1, 2
  ASSERT_TRUE(table_->CopySequence(kA, kB, 8).ok());
  EXPECT_EQ(ToVector(table_->Pages(kB)), Ids({0, 1}));
  EXPECT_EQ(table_->Length(kB), 8u);
  EXPECT_EQ(Refs(0), 2u);
  EXPECT_EQ(Refs(2), 1u);
  ASSERT_TRUE(table_->CopySequence(kA, kC, 5).ok());  // page 1 half used
  EXPECT_EQ(ToVector(table_->Pages(kC)), Ids({0, 1}));
  EXPECT_EQ(table_->Cells(kC).back().pos, 4);
  AppendResult r = MustAppend(kC, 5, 6);
  ASSERT_EQ(r.cow_moves.size(), 1u);  // its cell 4 into a fresh page
  EXPECT_EQ(r.cow_moves[0].src, CellId(4));
  EXPECT_EQ(r.cow_moves[0].count, 1u);
  EXPECT_EQ(Refs(1), 2u);  // kA and kB
  EXPECT_EQ(table_->Length(kA), 10u);
  // More cells than the source has: all of them; onto itself: only whole.
  ASSERT_TRUE(table_->CopySequence(kA, kD, 99).ok());
  EXPECT_EQ(table_->Length(kD), 10u);
  EXPECT_TRUE(table_->CopySequence(kA, kA, 10).ok());
  EXPECT_EQ(table_->CopySequence(kA, kA, 4).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->Length(kA), 10u);
}

TEST_F(SequenceTableTest, AppendSequenceMovesWholePagesOntoTheEnd) {
  MustAppend(kA, 0, 4);  // page 0, full
  MustAppend(kC, 4, 6);  // page 1: a page loaded under a holding id
  ASSERT_TRUE(table_->AppendSequence(kA, kC).ok());
  EXPECT_FALSE(table_->Contains(kC));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({0, 1}));
  EXPECT_EQ(table_->Length(kA), 6u);
  EXPECT_EQ(table_->Cells(kA)[5].pos, 5);
  MustAppend(kD, 0, 2);
  EXPECT_EQ(table_->AppendSequence(kA, kD).code(),
            StatusCode::kInvalidArgument);  // kA ends inside page 1
  EXPECT_TRUE(table_->Contains(kD));
  EXPECT_EQ(table_->AppendSequence(kA, kA).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->AppendSequence(kA, kC).code(), StatusCode::kNotFound);
  ASSERT_TRUE(table_->AppendSequence(kB, kD).ok());  // onto a new sequence
  EXPECT_EQ(table_->Length(kB), 2u);
}

TEST_F(SequenceTableTest, ReplaceSequenceSwapsInTheSource) {
  MustAppend(kA, 0, 5);  // pages 0, 1
  MustAppend(kC, 0, 3);  // page 2: a slot restore built into a temp id
  ASSERT_TRUE(table_->ReplaceSequence(kA, kC).ok());
  EXPECT_FALSE(table_->Contains(kC));
  EXPECT_EQ(ToVector(table_->Pages(kA)), Ids({2}));
  EXPECT_THAT(Positions(table_->Cells(kA)), ElementsAre(0, 1, 2));
  EXPECT_TRUE(pool_->IsFree(PageId(0)));
  EXPECT_TRUE(table_->ReplaceSequence(kD, kA).ok());  // dst absent is fine
  EXPECT_EQ(table_->SequenceIds(), std::vector<SeqId>({kD}));
  Status missing = table_->ReplaceSequence(kA, kB);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "ReplaceSequence of seq#0: source seq#1 does not exist");
  EXPECT_TRUE(table_->ReplaceSequence(kD, kD).ok());
  EXPECT_EQ(table_->Length(kD), 3u);
}

TEST_F(SequenceTableTest, KeepOnlyRemoveSequenceClear) {
  MustAppend(kD, 0, 1);
  MustAppend(kA, 0, 5);
  MustAppend(kC, 0, 1);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  EXPECT_EQ(table_->SequenceIds(), std::vector<SeqId>({kA, kB, kC, kD}));
  table_->KeepOnly(kB);
  EXPECT_EQ(table_->SequenceIds(), std::vector<SeqId>({kB}));
  EXPECT_EQ(pool_->num_free_pages(), 6u);
  EXPECT_EQ(Refs(1), 1u);
  table_->RemoveSequence(kD);  // unknown: no-op
  table_->RemoveSequence(kB);
  EXPECT_EQ(pool_->num_free_pages(), 8u);
  MustAppend(kA, 0, 5);
  MustAppend(kB, 0, 5);
  table_->KeepOnly(SeqId(42));  // unknown: keeps nothing
  EXPECT_TRUE(table_->SequenceIds().empty());
  MustAppend(kA, 0, 5);
  table_->Clear();
  EXPECT_TRUE(table_->SequenceIds().empty());
  EXPECT_EQ(pool_->num_free_pages(), 8u);
}

TEST_F(SequenceTableTest, ShiftPositionsThenRemoveByPositionValue) {
  MustAppend(kA, 0, 6);
  table_->ShiftPositions(kA, 2, 4, 10);
  table_->ShiftPositions(kD, 0, kMaxPos, 1);  // unknown: no-op
  EXPECT_THAT(Positions(table_->Cells(kA)), ElementsAre(0, 1, 12, 13, 4, 5));
  EXPECT_EQ(table_->Cells(kA)[2].token, 1002);
  CellMoves moves = MustRemove(kA, 10, 20);
  EXPECT_THAT(moves, ElementsAre(Move(4, 2, 2)));
  EXPECT_THAT(Positions(table_->Cells(kA)), ElementsAre(0, 1, 4, 5));
  table_->ShiftPositions(kA, 0, kMaxPos, -4);
  EXPECT_THAT(Positions(table_->Cells(kA)), ElementsAre(-4, -3, 0, 1));
}

TEST_F(SequenceTableTest, ShiftOverflowDies) {
  MustAppend(kA, kMaxPos - 2, kMaxPos);
  EXPECT_DEATH(table_->ShiftPositions(kA, 0, kMaxPos, 5), "overflows");
}

TEST_F(SequenceTableTest, NumUsedCellsCountsSharedCellsOnce) {
  MustAppend(kA, 0, 8);
  ASSERT_TRUE(table_->CopySequence(kA, kB).ok());
  MustRemove(kB, 6, kMaxPos);  // B's tail page 1 is A's full page 1
  EXPECT_EQ(table_->num_used_cells(), 8u);
  MustRemove(kA, 7, kMaxPos);  // both partial: max fill is 3
  EXPECT_EQ(table_->num_used_cells(), 7u);
  MustAppend(kB, 6, 7);  // B copies page 1 away
  EXPECT_EQ(table_->num_used_cells(), 4u + 3u + 3u);
}

TEST_F(SequenceTableTest, CheckInvariantsDetectsForeignReferences) {
  MustAppend(kA, 0, 5);
  pool_->Ref(PageId(1));
  Status s = CheckInvariants(*table_);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "page#1 has refcount 2 but 1 sequences list it");
  pool_->Unref(PageId(1));
  pool_->AllocateSpecific(Ids({6}));
  EXPECT_THAT(CheckInvariants(*table_).message(),
              HasSubstr("page#6 has refcount 1 but 0"));
  pool_->Unref(PageId(6));
}

TEST_F(SequenceTableTest, PageRemapRewritesListsAndRefcounts) {
  MustAppend(kA, 0, 4);  // page 0
  MustAppend(kB, 0, 4);  // page 1
  MustAppend(kC, 0, 6);  // pages 2, 3
  ASSERT_TRUE(table_->CopySequence(kC, kD).ok());
  table_->RemoveSequence(kA);
  table_->RemoveSequence(kB);
  EXPECT_EQ(table_->SequencePageLists(),
            (std::vector<std::vector<PageId>>{Ids({2, 3}), Ids({2, 3})}));
  table_->ApplyPageRemap(Ids({0, 1, 0, 1, 4, 5, 6, 7}));
  EXPECT_TRUE(CheckInvariants(*table_).ok());
  EXPECT_EQ(ToVector(table_->Pages(kC)), Ids({0, 1}));
  EXPECT_EQ(ToVector(table_->Pages(kD)), Ids({0, 1}));
  EXPECT_EQ(Refs(0), 2u);
  EXPECT_TRUE(pool_->IsFree(PageId(2)));
  EXPECT_EQ(table_->CellAt(kD, 5), CellId(5));
  EXPECT_DEATH(table_->ApplyPageRemap(Ids({1, 1, 2, 3, 4, 5, 6, 7})),
               "not injective");
}

TEST_F(SequenceTableTest, DestructionAndMoveReleaseExactlyOnce) {
  MustAppend(kA, 0, 9);
  SequenceTable moved(std::move(*table_));
  EXPECT_TRUE(table_->SequenceIds().empty());
  EXPECT_EQ(moved.Length(kA), 9u);
  table_.reset();  // the moved-from table releases nothing
  EXPECT_EQ(pool_->num_free_pages(), 5u);
  {
    SequenceTable other(pool_.get(), policy_.get());
    ASSERT_TRUE(other.Append(kB, Tokens(0, 4)).ok());
    other = std::move(moved);  // releases B's page, takes A
    EXPECT_EQ(other.SequenceIds(), std::vector<SeqId>({kA}));
    EXPECT_EQ(pool_->num_free_pages(), 5u);
  }
  EXPECT_EQ(pool_->num_free_pages(), 8u);
}

TEST_F(SequenceTableTest, StatsReportUsageAndFragmentation) {
  MustAppend(kA, 0, 6);  // pages 0, 1
  MustAppend(kB, 0, 4);  // page 2
  MustAppend(kC, 0, 3);  // page 3
  table_->RemoveSequence(kB);
  ASSERT_TRUE(table_->CopySequence(kA, kD).ok());
  PoolStats stats = ComputeStats(*pool_, *table_);
  EXPECT_EQ(stats.num_cells, 32u);
  EXPECT_EQ(stats.used_cells, 9u);
  EXPECT_EQ(stats.allocated_cells, 12u);
  EXPECT_EQ(stats.free_cells, 20u);
  EXPECT_EQ(stats.num_free_runs, 2u);
  EXPECT_EQ(stats.largest_free_run_cells, 16u);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.2);
  EXPECT_THAT(stats.sequences, ElementsAre(SequenceStats{kA, 6, 2, 2},
                                           SequenceStats{kC, 3, 1, 0},
                                           SequenceStats{kD, 6, 2, 2}));
  EXPECT_EQ(FormatPoolStats(stats),
            "cells 32 used 9 allocated 12 free 20 runs 2 largest_run 16 "
            "frag 0.200");
  MustAppend(kC, 3, 23);  // fills the pool
  stats = ComputeStats(*pool_, *table_);
  EXPECT_EQ(stats.free_cells, 0u);
  EXPECT_EQ(stats.num_free_runs, 0u);
  EXPECT_EQ(stats.fragmentation, 0.0);
}

}  // namespace
}  // namespace kvault
