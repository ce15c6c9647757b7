#include "kv/defrag_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/sanitizers.h"
#include "kv/kv_storage.h"

namespace kvault {
namespace {

constexpr uint64_t kGarbage = ~uint64_t{0};

std::vector<PageId> Pages(std::initializer_list<uint32_t> ids) {
  std::vector<PageId> v;
  for (uint32_t id : ids) v.push_back(PageId(id));
  return v;
}

// Each sequence's own pages (those it lists first), recomputed
// independently of the planner.
std::vector<std::vector<uint32_t>> OwnPages(const DefragInput& in) {
  std::vector<bool> seen(in.num_pages, false);
  std::vector<std::vector<uint32_t>> own(in.seq_pages.size());
  for (size_t s = 0; s < in.seq_pages.size(); ++s) {
    for (PageId p : in.seq_pages[s]) {
      if (!seen[p.value()]) own[s].push_back(p.value());
      seen[p.value()] = true;
    }
  }
  return own;
}

// Applies the moves to a shadow of cell contents (cell c holds value c when
// used, garbage when free) and checks every promise of the plan.
testing::AssertionResult CheckPlan(const DefragInput& in,
                                   const DefragPlan& plan) {
  const uint64_t ps = in.page_size, n = in.num_pages;
  const auto own = OwnPages(in);
  std::vector<bool> used(n, false);
  uint32_t num_used = 0;
  for (const auto& o : own) {
    for (uint32_t p : o) used[p] = true, ++num_used;
  }
  if (plan.num_used_pages != num_used) {
    return testing::AssertionFailure()
           << "num_used_pages " << plan.num_used_pages;
  }
  uint64_t lower = 0;
  for (uint32_t p = num_used; p < n; ++p) lower += used[p] ? ps : 0;
  if (plan.lower_bound_cells != lower) {
    return testing::AssertionFailure()
           << "lower bound " << plan.lower_bound_cells << " != " << lower;
  }
  std::vector<uint64_t> cells(n * ps, kGarbage);  // [num_pages * page_size]
  for (uint64_t c = 0; c < n * ps; ++c) {
    if (used[c / ps]) cells[c] = c;
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < plan.moves.size(); ++i) {
    const CellMove& m = plan.moves[i];
    const uint64_t s = m.src.value(), d = m.dst.value();
    if (m.count == 0 || s % ps || d % ps || m.count % ps ||
        s + m.count > n * ps || d + m.count > n * ps ||
        !(s + m.count <= d || d + m.count <= s)) {
      return testing::AssertionFailure() << "bad move " << i << ": " << m.src
                                         << " -> " << m.dst << " x" << m.count;
    }
    std::copy(cells.begin() + s, cells.begin() + s + m.count,
              cells.begin() + d);
    sum += m.count;
  }
  if (sum != plan.cells_moved || plan.cells_moved < lower ||
      plan.cells_moved > ps * (num_used + num_used / 2)) {
    return testing::AssertionFailure() << "cells_moved " << plan.cells_moved
                                       << " sum " << sum << " lower " << lower;
  }
  if (plan.new_page_of.size() != n) {
    return testing::AssertionFailure() << "new_page_of size";
  }
  std::vector<bool> hit(n, false);
  for (uint32_t p = 0; p < n; ++p) {
    const uint32_t np = plan.new_page_of[p].value();
    if (np >= n || hit[np])
      return testing::AssertionFailure() << "not a permutation at " << p;
    hit[np] = true;
    if (!used[p]) {
      if (p >= num_used && np != p)
        return testing::AssertionFailure() << "free page " << p << " moved";
      continue;
    }
    if (np >= num_used)
      return testing::AssertionFailure() << "page " << p << " outside prefix";
    for (uint64_t i = 0; i < ps; ++i) {
      if (cells[np * ps + i] != p * ps + i) {
        return testing::AssertionFailure()
               << "page " << p << " -> " << np << " lost cell " << i;
      }
    }
  }
  const std::set<uint32_t> frag(plan.left_fragmented.begin(),
                                plan.left_fragmented.end());
  if (frag.size() != plan.num_sequences_left_fragmented ||
      frag.size() != plan.left_fragmented.size() ||
      (num_used < n && !frag.empty())) {
    return testing::AssertionFailure() << "bad left_fragmented";
  }
  for (uint32_t s = 0; s < own.size(); ++s) {
    if (frag.count(s) || own[s].empty()) continue;
    const uint32_t base = plan.new_page_of[own[s][0]].value();
    for (uint32_t k = 0; k < own[s].size(); ++k) {
      if (plan.new_page_of[own[s][k]].value() != base + k) {
        return testing::AssertionFailure()
               << "seq " << s << " not contiguous at " << k;
      }
    }
  }
  return testing::AssertionSuccess();
}

// Free pages handed out lowest first (a set) or at random (a vector).
class FreeList {
 public:
  FreeList(uint32_t n, bool lowest_first) : lowest_first_(lowest_first) {
    for (uint32_t p = 0; p < n; ++p) Put(p);
  }
  size_t size() const { return lowest_first_ ? set_.size() : vec_.size(); }
  void Put(uint32_t p) {
    lowest_first_ ? (void)set_.insert(p) : vec_.push_back(p);
  }
  uint32_t Take(std::mt19937& rng) {
    if (lowest_first_) {
      const uint32_t p = *set_.begin();
      set_.erase(set_.begin());
      return p;
    }
    std::swap(vec_[rng() % vec_.size()], vec_.back());
    const uint32_t p = vec_.back();
    vec_.pop_back();
    return p;
  }

 private:
  bool lowest_first_;
  std::set<uint32_t> set_;
  std::vector<uint32_t> vec_;
};

// Simulates a cache: sequences grow by taking free pages and some are
// released, which leaves holes.
std::vector<std::vector<PageId>> GrowAndRelease(std::mt19937& rng, uint32_t n,
                                                uint32_t num_seqs,
                                                uint32_t target_free) {
  std::vector<std::vector<PageId>> seqs(num_seqs);
  FreeList free(n, rng() % 2);
  for (uint32_t step = 0; step < 2 * n && free.size() > target_free; ++step) {
    auto& seq = seqs[rng() % num_seqs];
    if (rng() % 32 == 0) {  // release a whole sequence
      for (PageId p : seq) free.Put(p.value());
      seq.clear();
      continue;
    }
    seq.push_back(PageId(free.Take(rng)));
  }
  while (free.size() > target_free) {
    seqs[rng() % num_seqs].push_back(PageId(free.Take(rng)));
  }
  return seqs;
}

// Assigns runs of consecutive pages to random sequences, skipping some runs.
std::vector<std::vector<PageId>> Chunky(std::mt19937& rng, uint32_t n,
                                        uint32_t num_seqs, uint32_t free_pct) {
  std::vector<std::vector<PageId>> seqs(num_seqs);
  for (uint32_t p = 0; p < n;) {
    const uint32_t run = 1 + rng() % 6;
    const bool is_free = rng() % 100 < free_pct;
    auto& seq = seqs[rng() % num_seqs];
    for (uint32_t i = 0; i < run && p < n; ++i, ++p) {
      if (!is_free) seq.push_back(PageId(p));
    }
  }
  return seqs;
}

// Contiguous sequences of random lengths between random free runs, as a
// first-fit contiguous allocator leaves them.
std::vector<std::vector<PageId>> ContiguousRuns(std::mt19937& rng, uint32_t n,
                                                uint32_t max_len) {
  std::vector<std::vector<PageId>> seqs;
  for (uint32_t p = 0; p < n;) {
    const uint32_t len = 1 + rng() % max_len;
    const bool is_free = rng() % 3 == 0;
    if (!is_free) seqs.emplace_back();
    for (uint32_t i = 0; i < len && p < n; ++i, ++p) {
      if (!is_free) seqs.back().push_back(PageId(p));
    }
  }
  std::shuffle(seqs.begin(), seqs.end(), rng);
  return seqs;
}

// Adds sharing: forks that list a prefix of another sequence first, a page
// shared in the middle, and occasionally a page listed twice.
void AddSharing(std::mt19937& rng, std::vector<std::vector<PageId>>* seqs) {
  const size_t num = seqs->size();
  for (size_t j = 0; j < num; ++j) {
    const std::vector<PageId> donor = (*seqs)[rng() % num];  // may be seq
    auto& seq = (*seqs)[j];
    if (donor.empty() || rng() % 3 != 0) continue;
    if (rng() % 2) {
      const size_t m = 1 + rng() % donor.size();
      seq.insert(seq.begin(), donor.begin(), donor.begin() + m);
    } else {
      const size_t at = rng() % (seq.size() + 1);  // sequenced: seeds replay
      const PageId shared = donor[rng() % donor.size()];
      seq.insert(seq.begin() + at, shared);
    }
    if (!seq.empty() && rng() % 8 == 0) seq.push_back(seq[rng() % seq.size()]);
  }
}

DefragInput RandomInput(std::mt19937& rng, uint32_t page_size) {
  DefragInput in;
  in.page_size = page_size;
  in.num_pages = 1 + rng() % (page_size >= 256 ? 48 : 300);
  const uint32_t num_seqs = 1 + rng() % 24;
  const uint32_t mode = rng() % 4;
  if (mode == 0) {  // full pool
    in.seq_pages = GrowAndRelease(rng, in.num_pages, num_seqs, 0);
  } else if (mode == 1) {  // nearly empty pool
    in.seq_pages = GrowAndRelease(
        rng, in.num_pages, num_seqs,
        in.num_pages - std::min<uint32_t>(in.num_pages, 1 + rng() % 3));
  } else if (mode == 2) {
    in.seq_pages =
        GrowAndRelease(rng, in.num_pages, num_seqs, rng() % in.num_pages);
  } else {
    in.seq_pages = Chunky(rng, in.num_pages, num_seqs, rng() % 60);
  }
  if (rng() % 2) AddSharing(rng, &in.seq_pages);
  return in;
}

// Cells a plain sliding compaction (sequences in order of their first page,
// packed from 0) would move, ignoring cycle costs: a baseline to beat.
uint64_t SlidingCost(const DefragInput& in) {
  auto own = OwnPages(in);
  std::erase_if(own, [](const auto& o) { return o.empty(); });
  std::sort(own.begin(), own.end(),
            [](const auto& a, const auto& b) { return a[0] < b[0]; });
  uint64_t cursor = 0, moved = 0;
  for (const auto& o : own) {
    for (uint32_t p : o) moved += (p != cursor++) ? in.page_size : 0;
  }
  return moved;
}

class DefragRandomTest : public testing::TestWithParam<uint32_t> {};

TEST_P(DefragRandomTest, PlansPreserveContentAndCompact) {
  const uint32_t page_size = GetParam();
  const int num_cases = page_size >= 256 ? 400 : 2000;
  uint64_t total_moved = 0, total_lower = 0, total_sliding = 0;
  for (int i = 0; i < num_cases; ++i) {
    const uint32_t seed = 1000 * page_size + i;
    std::mt19937 rng(seed);
    const DefragInput in = RandomInput(rng, page_size);
    const DefragPlan plan = PlanDefrag(in);
    ASSERT_TRUE(CheckPlan(in, plan))
        << "seed " << seed << " pages " << in.num_pages;
    total_moved += plan.cells_moved;
    total_lower += plan.lower_bound_cells;
    total_sliding += SlidingCost(in);
  }
  std::printf(
      "page_size %u: %llu cells moved, lower bound %llu, sliding %llu\n",
      page_size, static_cast<unsigned long long>(total_moved),
      static_cast<unsigned long long>(total_lower),
      static_cast<unsigned long long>(total_sliding));
  EXPECT_LT(total_moved, total_sliding);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, DefragRandomTest,
                         testing::Values(1u, 16u, 256u));

TEST(DefragPlannerTest, ContiguousSequencesMoveLittleMoreThanTheTail) {
  uint64_t total_moved = 0, total_lower = 0, total_sliding = 0;
  for (uint32_t seed = 0; seed < 500; ++seed) {
    std::mt19937 rng(seed);
    DefragInput in{64 + static_cast<uint32_t>(rng() % 2000), 16, {}};
    in.seq_pages = ContiguousRuns(rng, in.num_pages, 1 + rng() % 40);
    const DefragPlan plan = PlanDefrag(in);
    ASSERT_TRUE(CheckPlan(in, plan)) << "seed " << seed;
    total_moved += plan.cells_moved;
    total_lower += plan.lower_bound_cells;
    total_sliding += SlidingCost(in);
  }
  std::printf("contiguous: %llu cells moved, lower bound %llu, sliding %llu\n",
              static_cast<unsigned long long>(total_moved),
              static_cast<unsigned long long>(total_lower),
              static_cast<unsigned long long>(total_sliding));
  EXPECT_LT(total_moved, total_sliding);
}

TEST(DefragPlannerTest, SinglePageSequencesReachTheLowerBound) {
  // Any hole fits any one-page sequence, so the greedy must be optimal.
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    DefragInput in{1 + static_cast<uint32_t>(rng() % 200), 4, {}};
    for (uint32_t p = 0; p < in.num_pages; ++p) {
      if (rng() % 3) in.seq_pages.push_back({PageId(p)});
    }
    std::shuffle(in.seq_pages.begin(), in.seq_pages.end(), rng);
    const DefragPlan plan = PlanDefrag(in);
    ASSERT_TRUE(CheckPlan(in, plan)) << "seed " << seed;
    ASSERT_EQ(plan.cells_moved, plan.lower_bound_cells) << "seed " << seed;
  }
}

TEST(DefragPlannerTest, AlignedEqualBlocksReachTheLowerBound) {
  // Contiguous 4-page sequences at multiples of 4: every hole is a multiple
  // of 4, so only the tail needs to move.
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    DefragInput in{4 * (1 + static_cast<uint32_t>(rng() % 50)), 16, {}};
    for (uint32_t p = 0; p < in.num_pages; p += 4) {
      if (rng() % 2) in.seq_pages.push_back(Pages({p, p + 1, p + 2, p + 3}));
    }
    const DefragPlan plan = PlanDefrag(in);
    ASSERT_TRUE(CheckPlan(in, plan)) << "seed " << seed;
    ASSERT_EQ(plan.cells_moved, plan.lower_bound_cells) << "seed " << seed;
  }
}

TEST(DefragPlannerTest, CompactPoolNeedsNoMoves) {
  const DefragInput in{
      10, 16, {Pages({3, 4, 5}), Pages({0, 1, 2}), Pages({6})}};
  const DefragPlan plan = PlanDefrag(in);
  EXPECT_TRUE(plan.moves.empty());
  EXPECT_EQ(plan.cells_moved, 0u);
  for (uint32_t p = 0; p < 10; ++p) EXPECT_EQ(plan.new_page_of[p], PageId(p));
}

TEST(DefragPlannerTest, TailFillsHoleInOneMergedMove) {
  // A [0,3), hole [3,5), B [5,8), C at [8,10): C moves into the hole.
  const DefragInput in{
      12, 16, {Pages({0, 1, 2}), Pages({5, 6, 7}), Pages({8, 9})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0], (CellMove{CellId(8 * 16), CellId(3 * 16), 32}));
  EXPECT_EQ(plan.cells_moved, plan.lower_bound_cells);
  EXPECT_EQ(plan.new_page_of[8], PageId(3));
  EXPECT_EQ(plan.new_page_of[3], PageId(8));  // the free page takes C's slot
  EXPECT_EQ(plan.new_page_of[10], PageId(10));
}

TEST(DefragPlannerTest, ContiguousSequenceInsidePrefixStaysPut) {
  // U = 7. B is contiguous at [3,6); A (partly in place at 0) and C fill
  // around it, and only the pages that must move do.
  const DefragInput in{9, 1, {Pages({0, 8, 1}), Pages({3, 4, 5}), Pages({7})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  for (uint32_t p : {0, 3, 4, 5}) EXPECT_EQ(plan.new_page_of[p], PageId(p));
  EXPECT_EQ(plan.new_page_of[8], PageId(1));
  EXPECT_EQ(plan.new_page_of[1], PageId(2));
  EXPECT_EQ(plan.new_page_of[7], PageId(6));
  EXPECT_EQ(plan.cells_moved, 3u);  // lower bound 2: page 1 is in A's way
}

TEST(DefragPlannerTest, SmallLaterSequenceFillsAnOddHole) {
  // Hole [0,3), A [3,13), B [13,16), tail C [16,20); U = 17. C (4 pages)
  // cannot fill the 3-page hole; moving B there (3) beats moving A (10).
  DefragInput in{24, 8, {{}, {}, {}}};
  for (uint32_t p = 3; p < 13; ++p) in.seq_pages[0].push_back(PageId(p));
  in.seq_pages[1] = Pages({13, 14, 15});
  in.seq_pages[2] = Pages({16, 17, 18, 19});
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  EXPECT_EQ(plan.new_page_of[3], PageId(3));
  EXPECT_EQ(plan.new_page_of[13], PageId(0));
  EXPECT_EQ(plan.cells_moved, 7u * 8u);
}

TEST(DefragPlannerTest, CycleWithoutFreePageIsLeftFragmented) {
  const DefragInput in{3, 8, {Pages({1, 0}), Pages({2})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  EXPECT_TRUE(plan.moves.empty());
  EXPECT_EQ(plan.num_sequences_left_fragmented, 1u);
  EXPECT_EQ(plan.left_fragmented, std::vector<uint32_t>{0});
}

TEST(DefragPlannerTest, CycleIsBrokenThroughAScratchPage) {
  const DefragInput in{3, 8, {Pages({1, 0})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  EXPECT_EQ(plan.num_sequences_left_fragmented, 0u);
  EXPECT_EQ(plan.cells_moved, 3u * 8u);  // two pages + one scratch trip
  EXPECT_EQ(plan.new_page_of[1], PageId(0));
  EXPECT_EQ(plan.new_page_of[0], PageId(1));
}

TEST(DefragPlannerTest, SwappedHalvesRotateThroughScratchInMergedMoves) {
  // Two 2-page cycles (0<->2, 1<->3) run in parallel waves, so each wave is
  // one 2-page move: out to scratch, in, back from scratch.
  const DefragInput in{6, 2, {Pages({2, 3, 0, 1})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  ASSERT_EQ(plan.moves.size(), 3u);
  for (const CellMove& m : plan.moves) EXPECT_EQ(m.count, 4u);
  EXPECT_EQ(plan.cells_moved, 12u);
  EXPECT_EQ(plan.new_page_of[2], PageId(0));
}

TEST(DefragPlannerTest, SharedPageIsPlacedWithItsFirstLister) {
  const DefragInput in{8, 4, {Pages({5, 6}), Pages({5, 6, 7}), Pages({2})}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  EXPECT_EQ(plan.num_used_pages, 4u);
  EXPECT_EQ(plan.new_page_of[6].value(), plan.new_page_of[5].value() + 1);
}

TEST(DefragPlannerTest, EmptyInputs) {
  const DefragPlan none = PlanDefrag(DefragInput{0, 16, {}});
  EXPECT_TRUE(none.moves.empty());
  EXPECT_TRUE(none.new_page_of.empty());
  const DefragInput in{4, 16, {{}, Pages({3}), {}}};
  const DefragPlan plan = PlanDefrag(in);
  ASSERT_TRUE(CheckPlan(in, plan));
  EXPECT_EQ(plan.cells_moved, 16u);
}

// A valid plan on a million-cell pool in four occupancy shapes. Planner speed
// is measured by kv_bench (BM_PlanDefrag), not asserted here; sanitizer
// builds use a quarter of the pool so CI stays quick.
#if KVAULT_ADDRESS_SANITIZER
constexpr uint32_t kBigPoolPages = 1u << 18;
#else
constexpr uint32_t kBigPoolPages = 1u << 20;
#endif

TEST(DefragPlannerTest, MillionCellPoolsGetValidPlans) {
  for (int shape = 0; shape < 4; ++shape) {
    const uint32_t seed = 4242 + shape;
    std::mt19937 rng(seed);
    DefragInput in{kBigPoolPages, 1, {}};
    if (shape == 0) {
      in.seq_pages = Chunky(rng, in.num_pages, 2000, 10);  // interleaved
    } else if (shape == 1) {
      in.seq_pages = ContiguousRuns(rng, in.num_pages, 64);
    } else if (shape == 2) {
      in.seq_pages = GrowAndRelease(rng, in.num_pages, 300, in.num_pages / 20);
    } else {  // half a million one- and two-page sequences
      in.seq_pages = ContiguousRuns(rng, in.num_pages, 2);
    }
    const DefragPlan plan = PlanDefrag(in);
    std::printf(
        "%u cells, shape %d: %zu moves, %llu cells moved, lower bound %llu\n",
        in.num_pages, shape, plan.moves.size(),
        static_cast<unsigned long long>(plan.cells_moved),
        static_cast<unsigned long long>(plan.lower_bound_cells));
    ASSERT_TRUE(CheckPlan(in, plan)) << "seed " << seed;
  }
}

TEST(DefragPlannerDeathTest, BadInputsDie) {
  EXPECT_DEATH(PlanDefrag(DefragInput{4, 16, {Pages({4})}}), "check failed");
  EXPECT_DEATH(PlanDefrag(DefragInput{4, 0, {}}), "check failed");
}

// End to end: distinct K/V per cell, plan, move, and every sequence's bytes
// come back in order at its new pages.
class DefragStorageTest : public testing::TestWithParam<KvDtype> {};

TEST_P(DefragStorageTest, ApplyMovesKeepsEverySequencesBytes) {
  for (uint32_t seed = 0; seed < 30; ++seed) {
    std::mt19937 rng(seed);
    const uint32_t ps = 4;
    DefragInput in{40, ps, {}};
    in.seq_pages = GrowAndRelease(rng, in.num_pages, 6, rng() % 12);
    AddSharing(rng, &in.seq_pages);
    const KvLayout layout{2, 2, 32, 16, GetParam()};
    StatusOr<KvStorage> made =
        KvStorage::Create(layout, uint64_t{in.num_pages} * ps);
    ASSERT_TRUE(made.ok()) << made.status();
    KvStorage& s = *made;
    std::normal_distribution<float> normal;
    std::vector<float> k(layout.k_row_elems()), v(layout.v_row_elems());
    for (uint64_t c = 0; c < s.num_cells(); ++c) {
      for (uint32_t layer = 0; layer < 2; ++layer) {
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        s.Write(KvSide::kK, layer, CellId(c), k);
        s.Write(KvSide::kV, layer, CellId(c), v);
      }
    }
    auto snapshot = [&](uint32_t page, uint32_t layer, bool is_k) {
      std::span<const std::byte> b =
          is_k ? std::as_const(s).Rows(KvSide::kK, layer,
                                       CellId(uint64_t{page} * ps), ps)
               : std::as_const(s).Rows(KvSide::kV, layer,
                                       CellId(uint64_t{page} * ps), ps);
      return std::vector<std::byte>(b.begin(), b.end());
    };
    std::vector<std::vector<std::byte>> before;  // [page][layer][k/v]
    for (uint32_t p = 0; p < in.num_pages; ++p) {
      for (uint32_t layer = 0; layer < 2; ++layer) {
        before.push_back(snapshot(p, layer, true));
        before.push_back(snapshot(p, layer, false));
      }
    }
    const DefragPlan plan = PlanDefrag(in);
    ASSERT_TRUE(CheckPlan(in, plan)) << "seed " << seed;
    s.ApplyMoves(plan.moves);
    for (const auto& seq : in.seq_pages) {
      for (PageId p : seq) {
        const uint32_t np = plan.new_page_of[p.value()].value();
        for (uint32_t layer = 0; layer < 2; ++layer) {
          ASSERT_EQ(snapshot(np, layer, true),
                    before[p.value() * 4 + layer * 2])
              << "seed " << seed << " page " << p;
          ASSERT_EQ(snapshot(np, layer, false),
                    before[p.value() * 4 + layer * 2 + 1])
              << "seed " << seed << " page " << p;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, DefragStorageTest,
                         testing::Values(KvDtype::kF32, KvDtype::kF16,
                                         KvDtype::kQ8_0),
                         [](const testing::TestParamInfo<KvDtype>& info) {
                           return std::string(DtypeName(info.param));
                         });

}  // namespace
}  // namespace kvault
