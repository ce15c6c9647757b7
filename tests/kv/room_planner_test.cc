// RoomPlanner: which idle sequences to evict so that N pages can be placed,
// decided from a bookkeeping-only cache and the vault's facts alone. Plans
// are executed here by removing sequences from the cache, as the vault's
// evictions would.
#include "kv/room_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

constexpr uint32_t kPageSize = 4;
constexpr uint32_t kNumPages = 16;

std::vector<uint32_t> Ids(const std::vector<SeqId>& seqs) {
  std::vector<uint32_t> out;
  for (SeqId s : seqs) out.push_back(s.value());
  return out;
}

// Evicts the longest sequence first: an order LRU would never give.
class LongestFirstPolicy final : public EvictionPolicy {
 public:
  std::vector<SeqId> EvictionOrder(
      std::span<const SeqUsage> candidates) const override {
    std::vector<SeqUsage> idle;
    for (const SeqUsage& u : candidates) {
      if (!u.active) idle.push_back(u);
    }
    std::stable_sort(idle.begin(), idle.end(),
                     [](const SeqUsage& a, const SeqUsage& b) {
                       return a.num_cells > b.num_cells;
                     });
    std::vector<SeqId> order;
    for (const SeqUsage& u : idle) order.push_back(u.seq);
    return order;
  }
  std::string_view name() const override { return "longest"; }
};

class RoomPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeCache(KvPolicy::kPaged); }

  // A bookkeeping-only cache: the planner needs no K/V data.
  void MakeCache(KvPolicy policy) {
    KvCacheOptions options;
    options.num_pages = kNumPages;
    options.page_size = kPageSize;
    options.policy = policy;
    auto cache = KvCache::Create(options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(cache).value();
  }

  // Appends `num_tokens` tokens to `id`, used at `last_use`, spillable.
  void Add(uint32_t id, uint64_t num_tokens, uint64_t last_use) {
    const Pos first = static_cast<Pos>(cache_->table().Length(SeqId(id)));
    std::vector<TokenPos> tokens;
    for (uint64_t i = 0; i < num_tokens; ++i) {
      tokens.push_back({static_cast<TokenId>(i), first + static_cast<Pos>(i)});
    }
    auto cells = cache_->Append(SeqId(id), tokens);
    KV_CHECK(cells.ok()) << cells.status();
    facts_[id] = RoomSeqFacts{last_use, false, true};
  }

  RoomPlanner Planner() const {
    return RoomPlanner(*cache_, *policy_, [this](SeqId seq) {
      auto it = facts_.find(seq.value());
      return it != facts_.end() ? it->second : RoomSeqFacts{};
    });
  }

  // Runs the ladder as the vault does, evicting by removal; returns the
  // evicted ids, or the plan's error.
  StatusOr<std::vector<uint32_t>> Execute(const RoomRequest& request) {
    const RoomPlanner planner = Planner();
    std::vector<uint32_t> evicted;
    if (planner.CanPlace(request.num_pages)) return evicted;
    KV_ASSIGN_OR_RETURN(const RoomPlan plan, planner.Plan(request));
    if (plan.target_first) {
      cache_->RemoveSequence(*request.own);
      evicted.push_back(request.own->value());
    }
    for (SeqId seq : plan.order) {
      if (planner.CanPlace(request.num_pages)) return evicted;
      cache_->RemoveSequence(seq);
      evicted.push_back(seq.value());
    }
    if (planner.CanPlace(request.num_pages)) return evicted;
    return planner.NoRoomError(request, evicted.size());
  }

  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<EvictionPolicy> policy_ = MakeLruEvictionPolicy();
  std::map<uint32_t, RoomSeqFacts> facts_;
};

TEST_F(RoomPlannerTest, EnoughRoomAlreadyEvictsNothing) {
  Add(1, 12, 1);  // 3 pages
  Add(2, 12, 2);  // 3 pages; 10 free
  const RoomPlanner planner = Planner();
  EXPECT_TRUE(planner.CanPlace(10));
  EXPECT_FALSE(planner.CanPlace(11));
  auto evicted = Execute({10, {}, std::nullopt, "need 10"});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_TRUE(evicted->empty());
  EXPECT_TRUE(cache_->table().Contains(SeqId(1)));
  EXPECT_TRUE(cache_->table().Contains(SeqId(2)));
}

TEST_F(RoomPlannerTest, EvictsInLruOrderUntilPlaceable) {
  Add(1, 12, 30);  // most recently used
  Add(2, 12, 10);  // least recently used
  Add(3, 12, 20);
  Add(4, 12, 40);  // 12 of 16 pages used, 4 free
  auto plan = Planner().Plan({9, {}, std::nullopt, "need 9"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->target_first);
  EXPECT_EQ(Ids(plan->order), (std::vector<uint32_t>{2, 3, 1, 4}));
  // 4 free + seq 2's 3 + seq 3's 3 >= 9: the others stay.
  auto evicted = Execute({9, {}, std::nullopt, "need 9"});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, (std::vector<uint32_t>{2, 3}));
  EXPECT_TRUE(cache_->table().Contains(SeqId(1)));
  EXPECT_TRUE(cache_->table().Contains(SeqId(4)));
}

TEST_F(RoomPlannerTest, FollowsTheEvictionPolicysOrder) {
  policy_ = std::make_unique<LongestFirstPolicy>();
  Add(1, 4, 1);   // 1 page
  Add(2, 16, 2);  // 4 pages
  Add(3, 8, 3);   // 2 pages; 9 free
  auto evicted = Execute({12, {}, std::nullopt, "need 12"});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, std::vector<uint32_t>{2});
}

TEST_F(RoomPlannerTest, ProtectedActiveScratchEmptyAndUnspillableNeverChosen) {
  Add(1, 4, 1);  // protected
  Add(2, 4, 2);  // active
  Add(kFirstScratchSeq.value(), 4, 3);
  Add(4, 4, 4);  // no tier could take it
  Add(5, 4, 5);  // the only candidate
  facts_[2].active = true;
  facts_[4].spillable = false;
  ASSERT_TRUE(cache_->Append(SeqId(6), {}).ok());  // holds no cells
  ASSERT_TRUE(cache_->table().Contains(SeqId(6)));
  ASSERT_EQ(cache_->table().Length(SeqId(6)), 0u);
  facts_[6] = RoomSeqFacts{0, false, true};
  const std::vector<SeqId> protect = {SeqId(1)};
  const RoomPlanner planner = Planner();
  EXPECT_EQ(Ids(planner.Candidates(protect)), std::vector<uint32_t>{5});
  // 11 free + seq 5's page = 12: 12 fits, 13 does not.
  auto evicted = Execute({12, protect, std::nullopt, "need 12"});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, std::vector<uint32_t>{5});
  for (uint32_t id : {1u, 2u, kFirstScratchSeq.value(), 4u}) {
    EXPECT_TRUE(cache_->table().Contains(SeqId(id))) << id;
  }
  auto refused = Planner().Plan({13, protect, std::nullopt, "need 13"});
  EXPECT_TRUE(refused.status().IsResourceExhausted()) << refused.status();
}

// Free 8 + evictable 2 (seq 2 shares its pages with the active seq 5, so
// evicting it frees none) < 12: refused before anything is evicted.
TEST_F(RoomPlannerTest, RefusesNamingNeededVsAvailableWhenAllFallShort) {
  Add(1, 8, 1);
  Add(2, 12, 2);
  Add(3, 12, 3);  // 8 pages used
  ASSERT_TRUE(cache_->CopySequence(SeqId(2), SeqId(5)).ok());
  facts_[5] = RoomSeqFacts{4, true, true};
  auto plan = Planner().Plan({12, {SeqId(3)}, std::nullopt, "making room"});
  ASSERT_TRUE(plan.status().IsResourceExhausted()) << plan.status();
  EXPECT_EQ(plan.status().message(),
            "making room; free 8 pages, evictable 2 pages");
  EXPECT_EQ(
      Planner().PagesFreedByEvicting(std::vector<SeqId>{SeqId(1), SeqId(2)}),
      2u);
  EXPECT_EQ(
      Planner().PagesFreedByEvicting(std::vector<SeqId>{SeqId(2), SeqId(5)}),
      3u);
  // Exactly enough is enough.
  auto fits = Planner().Plan({10, {SeqId(3)}, std::nullopt, "making room"});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(Ids(fits->order), (std::vector<uint32_t>{1, 2}));
}

TEST_F(RoomPlannerTest, NoRoomErrorDescribesThePlacementFailure) {
  Add(1, 16, 1);
  const Status error = Planner().NoRoomError({14, {}, std::nullopt, "x"}, 2);
  EXPECT_TRUE(error.IsResourceExhausted()) << error;
  EXPECT_EQ(error.message(),
            "x; no room after evicting 2 sequences: need 14 pages, 12 free");
}

TEST_F(RoomPlannerTest, RestoreTargetsOwnPagesCountAndGoFirstOnlyWhenNeeded) {
  Add(1, 12, 1);
  Add(2, 12, 2);  // the target
  Add(3, 12, 3);  // 7 free
  const RoomRequest need_13{13, {SeqId(2)}, SeqId(2), "restore needs 13"};
  // 7 free + 6 evictable suffice: the target is only the last resort.
  auto last = Planner().Plan(need_13);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_FALSE(last->target_first);
  EXPECT_EQ(Ids(last->order), (std::vector<uint32_t>{1, 3, 2}));
  // 7 + 6 < 16, but with the target's own 3 it fits: it goes first.
  const RoomRequest need_16{16, {SeqId(2)}, SeqId(2), "restore needs 16"};
  auto first = Planner().Plan(need_16);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->target_first);
  EXPECT_EQ(Ids(first->order), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(first->short_of_room.message(),
            "restore needs 16; free 7 pages, evictable 6 pages");
  auto evicted = Execute(need_16);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(*evicted, (std::vector<uint32_t>{2, 1, 3}));
}

TEST_F(RoomPlannerTest, UnspillableOrAbsentTargetAddsNothing) {
  Add(1, 12, 1);
  Add(2, 12, 2);  // the target, too big for any tier
  facts_[2].spillable = false;
  auto plan = Planner().Plan({14, {SeqId(2)}, SeqId(2), "restore"});
  ASSERT_TRUE(plan.status().IsResourceExhausted()) << plan.status();
  EXPECT_EQ(plan.status().message(),
            "restore; free 10 pages, evictable 3 pages");
  auto fits = Planner().Plan({13, {SeqId(2)}, SeqId(2), "restore"});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(Ids(fits->order), std::vector<uint32_t>{1});
  // A target that is not resident is never queued for eviction.
  facts_[2].spillable = true;
  facts_[9] = RoomSeqFacts{0, false, true};
  auto absent = Planner().Plan({14, {SeqId(9)}, SeqId(9), "restore"});
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->target_first);
  EXPECT_EQ(Ids(absent->order), (std::vector<uint32_t>{1, 2}));
}

// Under contiguous placement free pages are not enough: eviction goes on
// until one run of free pages fits.
TEST_F(RoomPlannerTest, ContiguousPolicyNeedsOneRunOfFreePages) {
  MakeCache(KvPolicy::kContiguous);
  for (uint32_t id = 1; id <= kNumPages; ++id) Add(id, kPageSize, id);
  for (uint32_t id = 2; id <= kNumPages; id += 2) {
    cache_->RemoveSequence(SeqId(id));  // pages 1, 3, 5, ... free
    facts_.erase(id);
  }
  ASSERT_EQ(cache_->pool().num_free_pages(), 8u);
  const RoomPlanner planner = Planner();
  EXPECT_TRUE(planner.CanPlace(1));
  EXPECT_FALSE(planner.CanPlace(2));  // 8 free, but no two in a row
  auto evicted = Execute({3, {}, std::nullopt, "need 3"});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  // LRU: seq 1 (page 0) frees a run of 2; seq 3 (page 2) makes it 4.
  EXPECT_EQ(*evicted, (std::vector<uint32_t>{1, 3}));
  EXPECT_TRUE(Planner().CanPlace(3));
  EXPECT_FALSE(Planner().CanPlace(5));
  const Status error = Planner().NoRoomError({5, {}, std::nullopt, "x"}, 0);
  EXPECT_NE(error.message().find("no run of 5 free pages"), std::string::npos)
      << error;
}

TEST_F(RoomPlannerTest, ContiguousDefragCountsEveryFreePage) {
  MakeCache(KvPolicy::kContiguousDefrag);
  for (uint32_t id = 1; id <= kNumPages; ++id) Add(id, kPageSize, id);
  for (uint32_t id = 2; id <= kNumPages; id += 2) {
    cache_->RemoveSequence(SeqId(id));
  }
  // An Append there defragments: 8 scattered free pages hold 8.
  EXPECT_TRUE(Planner().CanPlace(8));
  EXPECT_FALSE(Planner().CanPlace(9));
}

}  // namespace
}  // namespace kvault
