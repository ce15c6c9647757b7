// How the plan is chosen (all page-granular; cells only at the end):
//
// 1. Blocks. Each sequence's own pages (first listed by it) form a block of
//    length L that must land on some base b as [b, b + L). U = total length,
//    so the blocks tile [0, U) exactly; a page stays put iff it is already at
//    b + k. Pages >= U always move: that is the lower bound.
// 2. Best base. For each block, the base inside [0, U - L] where most of its
//    pages are already in place (the mode of page[k] - k). A sequence that
//    is already contiguous inside [0, U) gets gain L at its current spot.
// 3. Anchors. Blocks are taken greedily by gain (then least wasted slots,
//    then lowest base) and pinned at their best base if the range is still
//    unclaimed.
// 4. Sweep. Left to right, each gap before the next anchor is filled from
//    the pool of unpinned blocks: best fit (largest block that fits, ties to
//    the lowest current first page) and, if that leaves a remainder, an
//    exact 0/1 subset-sum fill (work-budgeted). If the gap still cannot be
//    filled exactly, a later, smaller anchor with less gain than the next
//    one is moved into it; failing that, the next anchor is unpinned (it
//    loses its gain), joins the pool, and its gap merges with the next.
//    Past the last anchor the rest follow in order of current first page.
//    This always yields a tiling, and when tail blocks fill the holes
//    exactly only the tail moves: cells_moved == lower bound.
// 5. Moves. Page p goes to target[p]. A move into a free slot starts a
//    chain backwards (whoever targets the vacated slot goes next); chains
//    are emitted in waves (all first links, then all second links, ...),
//    which keeps block moves adjacent so they merge into one CellMove.
//    What remains are cycles; each is broken through a free page >= U
//    (free once the chains ran) used as scratch, several cycles in parallel
//    waves. With no free page at all, cycles stay in place and their
//    sequences are reported as left fragmented.
#include "kv/defrag_planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "core/check.h"

namespace kvault {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Each sequence's own pages, concatenated: block s is
// pages[begin[s], begin[s + 1]).
struct Blocks {
  std::vector<uint32_t> pages;  // [U]
  std::vector<uint32_t> begin;  // [num_seqs + 1]
  std::vector<uint32_t> owner;  // [num_pages] block of a used page, or kNone
  uint32_t size(size_t s) const { return begin[s + 1] - begin[s]; }
  uint32_t first_page(size_t s) const { return pages[begin[s]]; }
};

Blocks CollectBlocks(const DefragInput& in) {
  Blocks b;
  b.owner.assign(in.num_pages, kNone);
  b.begin.reserve(in.seq_pages.size() + 1);
  for (size_t s = 0; s < in.seq_pages.size(); ++s) {
    b.begin.push_back(static_cast<uint32_t>(b.pages.size()));
    for (PageId page : in.seq_pages[s]) {
      KV_CHECK_LT(page.value(), in.num_pages) << "seq index " << s;
      if (b.owner[page.value()] != kNone) continue;  // shared, placed earlier
      b.owner[page.value()] = static_cast<uint32_t>(s);
      b.pages.push_back(page.value());
    }
  }
  b.begin.push_back(static_cast<uint32_t>(b.pages.size()));
  return b;
}

struct Placement {
  uint32_t base = kNone;
  uint32_t gain = 0;  // pages already at base + k
};

// Returns each block's best base: the mode of page[k] - k within [0, U - L].
std::vector<Placement> FindBestBases(const Blocks& b, uint32_t num_used) {
  const size_t num_blocks = b.begin.size() - 1;
  std::vector<Placement> best(num_blocks);
  std::vector<uint32_t> count(num_used, 0);  // [U] votes per base
  std::vector<uint32_t> touched;
  for (size_t s = 0; s < num_blocks; ++s) {
    const uint32_t len = b.size(s);
    for (uint32_t k = 0; k < len; ++k) {
      const uint32_t page = b.pages[b.begin[s] + k];
      if (page < k || page - k > num_used - len) continue;
      const uint32_t base = page - k;
      if (count[base]++ == 0) touched.push_back(base);
      const Placement here{base, count[base]};
      if (here.gain > best[s].gain ||
          (here.gain == best[s].gain && here.base < best[s].base)) {
        best[s] = here;
      }
    }
    for (uint32_t base : touched) count[base] = 0;
    touched.clear();
  }
  return best;
}

// Pins blocks at their best base, greedily by gain; returns the pinned
// blocks sorted by base.
std::vector<uint32_t> SelectAnchors(const Blocks& b,
                                    const std::vector<Placement>& best,
                                    uint32_t num_used) {
  struct Candidate {
    uint32_t neg_gain, waste, base, s;  // sorts by gain desc, waste, base
    auto operator<=>(const Candidate&) const = default;
  };
  std::vector<Candidate> candidates;
  for (uint32_t s = 0; s < best.size(); ++s) {
    if (best[s].gain == 0) continue;
    candidates.push_back(
        {kNone - best[s].gain, b.size(s) - best[s].gain, best[s].base, s});
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<bool> taken(num_used, false);
  std::vector<uint32_t> anchors;
  for (const Candidate& c : candidates) {
    const uint32_t base = c.base;
    const uint32_t end = base + b.size(c.s);
    if (std::any_of(taken.begin() + base, taken.begin() + end,
                    [](bool t) { return t; })) {
      continue;
    }
    std::fill(taken.begin() + base, taken.begin() + end, true);
    anchors.push_back(c.s);
  }
  std::sort(anchors.begin(), anchors.end(), [&](uint32_t x, uint32_t y) {
    return best[x].base < best[y].base;
  });
  return anchors;
}

// Blocks looked up by "largest length <= limit"; among equal lengths the
// highest tiebreak wins. Removal is lazy (O(1)); a lookup that meets a
// removed entry drops it, so each entry costs one erase in total.
class FitSet {
 public:
  explicit FitSet(size_t num_blocks) : removed_(num_blocks, false) {}
  void Add(uint32_t s, uint32_t len, uint32_t tiebreak) {
    removed_[s] = false;
    set_.insert({Key(len, tiebreak), s});
  }
  void Remove(uint32_t s) { removed_[s] = true; }
  // Returns the best block of length <= max_len, or kNone.
  uint32_t Find(uint32_t max_len) {
    auto end = set_.upper_bound({Key(max_len, kNone), kNone});
    while (end != set_.begin()) {
      const auto it = std::prev(end);
      if (!removed_[it->second]) return it->second;
      set_.erase(it);
    }
    return kNone;
  }
  // Returns up to `limit` blocks of length <= max_len, shortest first.
  std::vector<uint32_t> AtMost(uint32_t max_len, uint64_t limit) {
    std::vector<uint32_t> out;
    const auto end = set_.upper_bound({Key(max_len, kNone), kNone});
    for (auto it = set_.begin(); it != end && out.size() < limit;) {
      if (removed_[it->second]) {
        it = set_.erase(it);
      } else {
        out.push_back((it++)->second);
      }
    }
    return out;
  }
  // Returns every block in the set.
  std::vector<uint32_t> All() const {
    std::vector<uint32_t> all;
    for (const auto& [key, s] : set_) {
      if (!removed_[s]) all.push_back(s);
    }
    return all;
  }

 private:
  static uint64_t Key(uint32_t len, uint32_t tiebreak) {
    return (uint64_t{len} << 32) | tiebreak;
  }
  std::set<std::pair<uint64_t, uint32_t>> set_;
  std::vector<bool> removed_;  // [num_blocks]
};

// The anchors the sweep has not reached: fixed at the start, then only
// removed. A sorted array plus a union-find "nearest live entry at or left
// of i" makes Find and Remove amortized near O(1).
class LaterAnchors {
 public:
  LaterAnchors(const Blocks& b, const std::vector<Placement>& best,
               const std::vector<uint32_t>& anchors)
      : index_of_(best.size(), 0), parent_(anchors.size() + 1) {
    for (uint32_t a : anchors) {
      // Among equal lengths the lowest gain sorts last, so Find prefers it.
      entries_.push_back(
          {(uint64_t{b.size(a)} << 32) | (kNone - best[a].gain), a});
    }
    std::sort(entries_.begin(), entries_.end());
    for (uint32_t i = 0; i < entries_.size(); ++i) {
      index_of_[entries_[i].second] = i + 1;  // 1-based; 0 is "none"
    }
    std::iota(parent_.begin(), parent_.end(), 0u);
  }
  void Remove(uint32_t a) {
    const uint32_t i = index_of_[a];
    if (parent_[i] == i) parent_[i] = i - 1;
  }
  // Returns the live anchor with the largest length <= max_len, or kNone.
  uint32_t Find(uint32_t max_len) {
    const uint64_t limit = (uint64_t{max_len} << 32) | kNone;
    const auto end = std::upper_bound(entries_.begin(), entries_.end(),
                                      std::make_pair(limit, kNone));
    const uint32_t live = Live(static_cast<uint32_t>(end - entries_.begin()));
    return live == 0 ? kNone : entries_[live - 1].second;
  }

 private:
  uint32_t Live(uint32_t i) {
    uint32_t root = i;
    while (parent_[root] != root) root = parent_[root];
    while (parent_[i] != root) i = std::exchange(parent_[i], root);
    return root;
  }
  std::vector<std::pair<uint64_t, uint32_t>> entries_;  // sorted (key, block)
  std::vector<uint32_t> index_of_;  // [num_blocks] 1-based entry index
  std::vector<uint32_t> parent_;    // [anchors + 1] union-find
};

// Step 4: fills [0, U) left to right around the anchors.
class Sweep {
 public:
  // `anchors`: the pinned blocks sorted by base.
  Sweep(const Blocks& b, const std::vector<Placement>& best,
        const std::vector<uint32_t>& anchors)
      : b_(b),
        best_(best),
        anchors_(anchors),
        base_(best.size(), kNone),
        pool_(best.size()),
        later_(b, best, anchors) {}

  // Returns the final base of every block (kNone for empty blocks).
  std::vector<uint32_t> Run() {
    std::vector<bool> pinned(best_.size(), false);
    for (uint32_t a : anchors_) pinned[a] = true;
    for (uint32_t s = 0; s < best_.size(); ++s) {
      if (!pinned[s] && b_.size(s) > 0) AddPool(s);
    }
    for (uint32_t a : anchors_) {
      if (base_[a] != kNone) continue;  // stolen into an earlier gap
      later_.Remove(a);
      FillGapBefore(a);
      if (cursor_ == best_[a].base) {
        Place(a);
      } else {
        AddPool(a);  // the gap cannot be filled exactly: unpin a
      }
    }
    std::vector<uint32_t> rest = pool_.All();
    std::sort(rest.begin(), rest.end(), [&](uint32_t x, uint32_t y) {
      return b_.first_page(x) < b_.first_page(y);
    });
    for (uint32_t s : rest) Place(s);
    return std::move(base_);
  }

 private:
  // Among equal lengths the pool prefers the lowest current first page.
  void AddPool(uint32_t s) {
    pool_.Add(s, b_.size(s), kNone - b_.first_page(s));
  }
  void Place(uint32_t s) {
    base_[s] = cursor_;
    cursor_ += b_.size(s);
  }
  // Places pool blocks before anchor a: best fit first; if that leaves a
  // remainder, an exact subset-sum fill; failing both, steals a smaller
  // later anchor when that loses less than unpinning a would.
  void FillGapBefore(uint32_t a) {
    const uint32_t end = best_[a].base;
    const uint32_t gap_start = cursor_;
    std::vector<uint32_t> placed = FillBestFit(end);
    if (cursor_ == end) return;
    for (uint32_t s : placed) {
      base_[s] = kNone;
      AddPool(s);
    }
    cursor_ = gap_start;
    if (FillExactly(end - cursor_)) return;
    FillBestFit(end);
    while (cursor_ < end) {
      const uint32_t s = later_.Find(end - cursor_);
      if (s == kNone || best_[s].gain >= best_[a].gain) return;
      later_.Remove(s);
      Place(s);
      FillBestFit(end);
    }
  }
  // Repeatedly places the largest pool block that fits before `end`.
  std::vector<uint32_t> FillBestFit(uint32_t end) {
    std::vector<uint32_t> placed;
    for (uint32_t s;
         cursor_ < end && (s = pool_.Find(end - cursor_)) != kNone;) {
      pool_.Remove(s);
      Place(s);
      placed.push_back(s);
    }
    return placed;
  }
  // Fills `room` exactly with pool blocks if a subset sums to it (0/1
  // subset-sum; reach[x] = the block that first made sum x reachable).
  // Bounded by a total work budget so huge pools fall back to best fit.
  bool FillExactly(uint32_t room) {
    const uint64_t max_items = dp_budget_ / room;
    const std::vector<uint32_t> items = pool_.AtMost(room, max_items + 1);
    const uint64_t work = uint64_t{room} * items.size();
    if (items.empty() || items.size() > max_items) return false;
    dp_budget_ -= work;
    std::vector<uint32_t> reach(room + 1, kNone);
    reach[0] = kNone - 1;
    for (auto it = items.rbegin(); it != items.rend(); ++it) {  // largest first
      const uint32_t s = *it;
      const uint32_t len = b_.size(s);
      for (uint32_t x = room; x >= len && reach[room] == kNone; --x) {
        if (reach[x] == kNone && reach[x - len] != kNone) reach[x] = s;
      }
    }
    if (reach[room] == kNone) return false;
    std::vector<uint32_t> chosen;
    for (uint32_t x = room; x > 0; x -= b_.size(reach[x]))
      chosen.push_back(reach[x]);
    std::sort(chosen.begin(), chosen.end(), [&](uint32_t x, uint32_t y) {
      return b_.first_page(x) < b_.first_page(y);
    });
    for (uint32_t s : chosen) {
      pool_.Remove(s);
      Place(s);
    }
    return true;
  }

  const Blocks& b_;
  const std::vector<Placement>& best_;
  const std::vector<uint32_t> anchors_;  // pinned blocks by base
  std::vector<uint32_t> base_;  // [num_blocks] final base, kNone if empty
  FitSet pool_;                 // blocks without a pinned spot
  LaterAnchors later_;          // anchors the sweep has not reached yet
  uint32_t cursor_ = 0;
  uint64_t dp_budget_ = uint64_t{1} << 26;  // ~0.1 s of subset-sum at most
};

// Appends page moves as cell moves, merging with the previous move when
// both ranges continue it and the merged ranges stay disjoint.
class MoveWriter {
 public:
  MoveWriter(uint32_t page_size, CellMoves* moves)
      : page_size_(page_size), moves_(moves) {}
  void Add(uint32_t src_page, uint32_t dst_page) {
    const uint64_t src = uint64_t{src_page} * page_size_;
    const uint64_t dst = uint64_t{dst_page} * page_size_;
    if (!moves_->empty()) {
      CellMove& last = moves_->back();
      const uint64_t ls = last.src.value(), ld = last.dst.value();
      const uint64_t n = last.count + page_size_;
      if (ls + last.count == src && ld + last.count == dst &&
          (ls + n <= ld || ld + n <= ls)) {
        last.count = n;
        return;
      }
    }
    moves_->push_back({CellId(src), CellId(dst), page_size_});
  }

 private:
  uint32_t page_size_;
  CellMoves* moves_;
};

struct MoveGraph {
  std::vector<uint32_t> target;  // [num_pages] new slot of a used page
  std::vector<uint32_t> src_of;  // [U] the page moving into a slot, or kNone
  std::vector<bool> done;        // [num_pages] move already emitted
  bool Moves(uint32_t p) const { return target[p] != kNone && target[p] != p; }
};

// Emits every chain (moves that end in an initially free slot) in waves.
void EmitChains(MoveGraph* graph, uint32_t num_used, MoveWriter* out) {
  const MoveGraph& g = *graph;
  std::vector<uint32_t> wave;  // slots to fill in this wave
  for (uint32_t d = 0; d < num_used; ++d) {
    if (g.src_of[d] != kNone && g.target[d] == kNone) wave.push_back(d);
  }
  std::vector<uint32_t> next;
  while (!wave.empty()) {
    for (uint32_t d : wave) {
      const uint32_t p = g.src_of[d];
      out->Add(p, d);
      graph->done[p] = true;
      if (p < num_used && g.src_of[p] != kNone) next.push_back(p);
    }
    wave.swap(next);
    next.clear();
  }
}

// Returns the steps that rotate the cycle through `c` via scratch page `f`.
std::vector<std::pair<uint32_t, uint32_t>> CycleSteps(const MoveGraph& g,
                                                      uint32_t c, uint32_t f) {
  std::vector<std::pair<uint32_t, uint32_t>> steps = {{c, f}};
  uint32_t d = c;
  for (uint32_t p = g.src_of[d]; p != c; p = g.src_of[d]) {
    steps.push_back({p, d});
    d = p;
  }
  steps.push_back({f, d});
  return steps;
}

// Emits `cycles` (each a list of steps) as parallel waves.
void EmitCycleBatch(
    const std::vector<std::vector<std::pair<uint32_t, uint32_t>>>& cycles,
    MoveWriter* out) {
  size_t longest = 0;
  for (const auto& c : cycles) longest = std::max(longest, c.size());
  for (size_t j = 0; j < longest; ++j) {
    for (const auto& c : cycles) {
      if (j < c.size()) out->Add(c[j].first, c[j].second);
    }
  }
}

// Breaks the remaining cycles through scratch pages [U, num_pages); with no
// scratch, undoes their targets and returns the pages left in place.
std::vector<uint32_t> EmitCycles(MoveGraph* g, uint32_t num_used,
                                 uint32_t num_pages, MoveWriter* out) {
  const uint32_t num_scratch = num_pages - num_used;
  std::vector<uint32_t> stuck;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> batch;
  for (uint32_t c = 0; c < num_used; ++c) {
    if (!g->Moves(c) || g->done[c]) continue;
    for (uint32_t p = c; !g->done[p]; p = g->target[p]) g->done[p] = true;
    if (num_scratch == 0) {
      for (uint32_t p = c; g->target[p] != p;) {
        const uint32_t next = g->target[p];
        g->target[p] = p;
        stuck.push_back(p);
        p = next;
      }
      continue;
    }
    batch.push_back(CycleSteps(*g, c, num_used + batch.size()));
    if (batch.size() == num_scratch) {
      EmitCycleBatch(batch, out);
      batch.clear();
    }
  }
  EmitCycleBatch(batch, out);
  return stuck;
}

MoveGraph BuildGraph(const Blocks& b, const std::vector<uint32_t>& base,
                     uint32_t num_pages, uint32_t num_used) {
  MoveGraph g;
  g.target.assign(num_pages, kNone);
  g.src_of.assign(num_used, kNone);
  g.done.assign(num_pages, false);
  for (size_t s = 0; s + 1 < b.begin.size(); ++s) {
    for (uint32_t k = 0; k < b.size(s); ++k) {
      const uint32_t p = b.pages[b.begin[s] + k];
      g.target[p] = base[s] + k;
      if (g.target[p] != p) g.src_of[g.target[p]] = p;
    }
  }
  return g;
}

// Fills new_page_of: used pages go to their target; free pages below U take
// the slots vacated above U, in ascending order, so it is a permutation.
std::vector<PageId> RemapTable(const MoveGraph& g, uint32_t num_used) {
  const uint32_t num_pages = static_cast<uint32_t>(g.target.size());
  std::vector<PageId> remap(num_pages);
  uint32_t vacated = num_used;
  for (uint32_t p = 0; p < num_pages; ++p) {
    if (g.target[p] != kNone) {
      remap[p] = PageId(g.target[p]);
    } else if (p >= num_used) {
      remap[p] = PageId(p);
    } else {
      while (g.target[vacated] == kNone) ++vacated;
      remap[p] = PageId(vacated++);
    }
  }
  return remap;
}

}  // namespace

DefragPlan PlanDefrag(const DefragInput& input) {
  KV_CHECK_GT(input.page_size, 0u);
  const Blocks blocks = CollectBlocks(input);
  const uint32_t num_used = static_cast<uint32_t>(blocks.pages.size());
  DefragPlan plan;
  plan.num_used_pages = num_used;
  for (uint32_t p : blocks.pages) {
    if (p >= num_used) plan.lower_bound_cells += input.page_size;
  }
  const std::vector<Placement> best = FindBestBases(blocks, num_used);
  const std::vector<uint32_t> base =
      Sweep(blocks, best, SelectAnchors(blocks, best, num_used)).Run();
  MoveGraph graph = BuildGraph(blocks, base, input.num_pages, num_used);
  MoveWriter writer(input.page_size, &plan.moves);
  EmitChains(&graph, num_used, &writer);
  const std::vector<uint32_t> stuck =
      EmitCycles(&graph, num_used, input.num_pages, &writer);
  for (uint32_t p : stuck) plan.left_fragmented.push_back(blocks.owner[p]);
  std::sort(plan.left_fragmented.begin(), plan.left_fragmented.end());
  plan.left_fragmented.erase(
      std::unique(plan.left_fragmented.begin(), plan.left_fragmented.end()),
      plan.left_fragmented.end());
  plan.num_sequences_left_fragmented =
      static_cast<uint32_t>(plan.left_fragmented.size());
  for (const CellMove& m : plan.moves) plan.cells_moved += m.count;
  plan.new_page_of = RemapTable(graph, num_used);
  return plan;
}

}  // namespace kvault
