// Randomized property test of SequenceTable against a reference model.
// Every op is checked against std::map<SeqId, vector<cell>>, and the data
// moves are checked through a shadow "storage" of one stamp per pool cell:
// a token's stamp is written where Append says, every returned CellMove is
// applied, and afterwards every sequence's cells must hold its stamps in
// order. Reproduce a failure with KVAULT_PROPERTY_SEED=<seed printed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kv/pool_stats.h"
#include "kv/sequence_table.h"

namespace kvault {
namespace {

constexpr Pos kMaxPos = std::numeric_limits<Pos>::max();
constexpr int kOpsPerConfig = 35000;  // 6 configs: 210k ops in all
const SeqId kTempSeq(7);              // where "slot restores" are built

struct Config {
  uint32_t page_size;
  uint32_t num_pages;
  const char* policy;
};

// Lets gtest name the configuration instead of dumping its bytes.
void PrintTo(const Config& config, std::ostream* os) {
  *os << config.policy << " page_size=" << config.page_size
      << " num_pages=" << config.num_pages;
}

struct ModelCell {
  TokenPos token;
  uint64_t stamp;
};
using Model = std::map<SeqId, std::vector<ModelCell>>;

uint64_t BaseSeed() {
  const char* env = std::getenv("KVAULT_PROPERTY_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20240611;
}

class PropertyRun {
 public:
  PropertyRun(const Config& config, uint64_t seed)
      : config_(config),
        seed_(seed),
        rng_(seed),
        pool_(std::move(PagePool::Create(config.num_pages, config.page_size))
                  .value()),
        policy_(std::move(MakeAllocationPolicy(config.policy)).value()),
        table_(&pool_, policy_.get()),
        storage_(pool_.num_cells(), 0),
        seen_(pool_.num_cells(), 0) {}

  // Runs `num_ops` random ops; returns "" or the first failure.
  std::string Run(int num_ops) {
    for (op_index_ = 0; op_index_ < num_ops; ++op_index_) {
      desc_.str("");
      std::string error = RandomOp();
      if (error.empty()) error = Verify();
      sum_used_pages_ += pool_.num_pages() - pool_.num_free_pages();
      if (!error.empty()) {
        std::ostringstream out;
        out << "seed=" << seed_ << " page_size=" << config_.page_size
            << " policy=" << config_.policy << " op#" << op_index_ << " ("
            << desc_.str() << "): " << error;
        return out.str();
      }
    }
    return "";
  }

  // Returns how many Appends failed with ResourceExhausted.
  int num_append_exhausted() const { return num_append_exhausted_; }
  // Returns how many RemoveRanges failed for lack of copy-on-write pages.
  int num_remove_exhausted() const { return num_remove_exhausted_; }

  // Returns the mean fraction of pages in use after an op.
  double mean_occupancy() const {
    return static_cast<double>(sum_used_pages_) / pool_.num_pages() /
           std::max(op_index_, 1);
  }

 private:
  uint64_t Uniform(uint64_t lo, uint64_t hi) {  // inclusive
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  SeqId RandomSeq() {
    uint64_t i = Uniform(0, 4);
    return i == 4 ? kTempSeq : SeqId(static_cast<uint32_t>(i));
  }
  // Returns the model's cells of `seq`, or nullptr when it does not exist
  // (which differs from existing with zero cells).
  const std::vector<ModelCell>* Find(SeqId seq) const {
    auto it = model_.find(seq);
    return it != model_.end() ? &it->second : nullptr;
  }
  Pos RandomPos(SeqId seq) {
    const std::vector<ModelCell>* cells = Find(seq);
    if (cells == nullptr || cells->empty()) {
      return static_cast<Pos>(Uniform(0, 10));
    }
    return (*cells)[Uniform(0, cells->size() - 1)].token.pos +
           static_cast<Pos>(Uniform(0, 4)) - 2;
  }

  // Whole-sequence drops are rare so the pool spends time near full.
  std::string RandomOp() {
    const uint64_t roll = Uniform(0, 399);
    if (roll < 210) return OpAppend();
    if (roll < 290) return OpRemoveRange();
    if (roll < 310) return OpCopy();
    if (roll < 326) return OpReplace();
    if (roll < 358) return OpShift();
    if (roll < 366) return OpRemoveSequence();
    if (roll < 368) return OpKeepOnly();
    if (roll < 369) return OpClear();
    return OpRemap();
  }

  std::string OpAppend() {
    const SeqId seq = RandomSeq();
    // Mostly decode-sized appends, sometimes a prompt-sized one.
    const uint64_t max_n = Uniform(0, 7) == 0 ? pool_.num_cells() / 4 : 8;
    const uint64_t n = Uniform(0, max_n);
    std::vector<TokenPos> tokens;
    const std::vector<ModelCell>* old = Find(seq);
    Pos pos = old == nullptr || old->empty() ? 0 : old->back().token.pos + 1;
    for (uint64_t i = 0; i < n; ++i) {
      if (Uniform(0, 19) == 0) pos = static_cast<Pos>(Uniform(0, 1000));
      tokens.push_back(
          TokenPos{static_cast<TokenId>(Uniform(0, 50000)), pos++});
    }
    desc_ << "Append " << seq << " n=" << n;
    const bool can = table_.CanAppend(seq, n);
    const uint32_t free_before = pool_.num_free_pages();
    StatusOr<AppendResult> r = table_.Append(seq, tokens);
    if (!r.ok()) {
      ++num_append_exhausted_;
      if (can) return "CanAppend was true but Append failed";
      if (!r.status().IsResourceExhausted()) return r.status().ToString();
      if (pool_.num_free_pages() != free_before) return "failure took pages";
      return "";
    }
    if (!can) return "CanAppend was false but Append succeeded";
    if (r->cells.size() != n) return "wrong number of cells";
    if (std::string e = ApplyMoves(r->cow_moves); !e.empty()) return e;
    std::vector<ModelCell>& cells = model_[seq];
    for (uint64_t i = 0; i < n; ++i) {
      storage_[r->cells[i].value()] = next_stamp_;
      cells.push_back(ModelCell{tokens[i], next_stamp_++});
    }
    return "";
  }

  std::string OpRemoveRange() {
    const SeqId seq = RandomSeq();
    Pos p0 = RandomPos(seq);
    const uint64_t kind = Uniform(0, 39);
    Pos p1 = kind == 0 ? kMaxPos : p0 + static_cast<Pos>(Uniform(0, 6));
    if (kind == 1) p1 = p0 - 1;  // invalid: p0 > p1
    desc_ << "RemoveRange " << seq << " [" << p0 << ", " << p1 << ")";
    const bool truncation = IsPureTruncation(seq, p0, p1);
    StatusOr<CellMoves> r = table_.RemoveRange(seq, p0, p1);
    if (!r.ok()) {
      if (p0 > p1 && r.status().code() == StatusCode::kInvalidArgument) {
        return "";
      }
      ++num_remove_exhausted_;
      if (!r.status().IsResourceExhausted()) return r.status().ToString();
      return "";
    }
    if (p0 > p1) return "accepted p0 > p1";
    if (truncation && !r->empty()) return "pure truncation moved data";
    if (std::string e = ApplyMoves(*r); !e.empty()) return e;
    auto it = model_.find(seq);
    if (it != model_.end()) {
      std::erase_if(it->second, [&](const ModelCell& c) {
        return c.token.pos >= p0 && c.token.pos < p1;
      });
    }
    return "";
  }

  bool IsPureTruncation(SeqId seq, Pos p0, Pos p1) {
    auto it = model_.find(seq);
    if (it == model_.end()) return true;
    bool removing = false;
    for (const ModelCell& c : it->second) {
      const bool in = c.token.pos >= p0 && c.token.pos < p1;
      if (removing && !in) return false;
      removing = removing || in;
    }
    return true;
  }

  std::string OpCopy() {
    const SeqId src = RandomSeq();
    const SeqId dst = RandomSeq();
    // Half the copies take a prefix (the prefix cache's sharing).
    const uint64_t len = table_.Length(src);
    const uint64_t n = Uniform(0, 1) == 0 ? len : Uniform(0, len);
    desc_ << "CopySequence " << src << " -> " << dst << " first " << n;
    Status s = table_.CopySequence(src, dst, n);
    auto it = model_.find(src);
    if (it == model_.end()) return s.IsNotFound() ? "" : "expected NotFound";
    if (src == dst && n < len) {
      return s.code() == StatusCode::kInvalidArgument ? ""
                                                      : "expected InvalidArgument";
    }
    if (!s.ok()) return s.ToString();
    std::vector<ModelCell> prefix(it->second.begin(), it->second.begin() + n);
    model_[dst] = std::move(prefix);
    return "";
  }

  std::string OpReplace() {
    const SeqId dst = SeqId(static_cast<uint32_t>(Uniform(0, 3)));
    const SeqId from = Uniform(0, 3) == 0 ? RandomSeq() : kTempSeq;
    desc_ << "ReplaceSequence " << dst << " <- " << from;
    Status s = table_.ReplaceSequence(dst, from);
    auto it = model_.find(from);
    if (it == model_.end()) return s.IsNotFound() ? "" : "expected NotFound";
    if (!s.ok()) return s.ToString();
    if (from == dst) return "";
    std::vector<ModelCell> moved = std::move(it->second);
    model_.erase(it);
    model_[dst] = std::move(moved);
    return "";
  }

  std::string OpShift() {
    const SeqId seq = RandomSeq();
    const Pos p0 = RandomPos(seq);
    const Pos p1 =
        Uniform(0, 4) == 0 ? kMaxPos : p0 + static_cast<Pos>(Uniform(0, 20));
    const Pos delta = static_cast<Pos>(Uniform(0, 40)) - 20;
    desc_ << "ShiftPositions " << seq << " [" << p0 << ", " << p1 << ") "
          << delta;
    table_.ShiftPositions(seq, p0, p1, delta);
    auto it = model_.find(seq);
    if (it == model_.end()) return "";
    for (ModelCell& c : it->second) {
      if (c.token.pos >= p0 && c.token.pos < p1) c.token.pos += delta;
    }
    return "";
  }

  std::string OpRemoveSequence() {
    const SeqId seq = RandomSeq();
    desc_ << "RemoveSequence " << seq;
    table_.RemoveSequence(seq);
    model_.erase(seq);
    return "";
  }

  std::string OpKeepOnly() {
    const SeqId seq = Uniform(0, 9) == 0 ? SeqId(99) : RandomSeq();
    desc_ << "KeepOnly " << seq;
    table_.KeepOnly(seq);
    std::erase_if(model_, [&](const auto& kv) { return kv.first != seq; });
    return "";
  }

  std::string OpClear() {
    desc_ << "Clear";
    table_.Clear();
    model_.clear();
    return "";
  }

  // A random defragmentation: every used page moves to a random distinct
  // page (chains and cycles included), data first, then the table.
  std::string OpRemap() {
    desc_ << "ApplyPageRemap";
    const uint32_t num_pages = pool_.num_pages();
    std::vector<uint32_t> targets(num_pages);
    std::iota(targets.begin(), targets.end(), 0);
    std::shuffle(targets.begin(), targets.end(), rng_);
    std::vector<PageId> new_page_of;
    std::vector<uint64_t> moved = storage_;
    const uint64_t page_size = config_.page_size;
    for (uint32_t p = 0, next = 0; p < num_pages; ++p) {
      if (pool_.IsFree(PageId(p))) {
        new_page_of.push_back(PageId(p));
        continue;
      }
      const uint32_t q = targets[next++];
      new_page_of.push_back(PageId(q));
      std::copy_n(storage_.begin() + p * page_size, page_size,
                  moved.begin() + q * page_size);
    }
    storage_ = std::move(moved);
    table_.ApplyPageRemap(new_page_of);
    return "";
  }

  std::string ApplyMoves(const CellMoves& moves) {
    for (const CellMove& m : moves) {
      const uint64_t s = m.src.value();
      const uint64_t d = m.dst.value();
      if (m.count == 0) return "empty move";
      if (s + m.count > storage_.size() || d + m.count > storage_.size()) {
        return "move out of the pool";
      }
      if (!(s + m.count <= d || d + m.count <= s)) return "overlapping move";
      std::copy_n(storage_.begin() + s, m.count, storage_.begin() + d);
    }
    return "";
  }

  std::string Verify() {
    Status inv = CheckInvariants(table_);
    if (!inv.ok()) return inv.ToString();
    std::vector<SeqId> ids;
    for (const auto& [id, cells] : model_) ids.push_back(id);
    if (table_.SequenceIds() != ids) return "sequence ids differ";
    uint64_t distinct = 0;
    const uint64_t mark = op_index_ + 1;
    for (const auto& [id, cells] : model_) {
      std::span<const TokenPos> got = table_.Cells(id);
      if (got.size() != cells.size()) return "length differs";
      for (size_t i = 0; i < cells.size(); ++i) {
        if (!(got[i] == cells[i].token)) return "token/pos differs";
        const uint64_t cell = table_.CellAt(id, i).value();
        if (storage_[cell] != cells[i].stamp) {
          std::ostringstream out;
          out << "data of " << id << " cell " << i << " lost: stamp "
              << storage_[cell] << ", expected " << cells[i].stamp;
          return out.str();
        }
        if (seen_[cell] != mark) ++distinct;
        seen_[cell] = mark;
      }
    }
    if (table_.num_used_cells() != distinct) return "num_used_cells differs";
    if (op_index_ % 64 == 0) return VerifyStats(distinct);
    return "";
  }

  std::string VerifyStats(uint64_t distinct) {
    PoolStats stats = ComputeStats(pool_, table_);
    if (stats.used_cells != distinct) return "stats used_cells";
    if (stats.allocated_cells + stats.free_cells != stats.num_cells) {
      return "stats allocated + free != total";
    }
    if (stats.fragmentation < 0.0 || stats.fragmentation >= 1.0) {
      return "stats fragmentation out of [0, 1)";
    }
    if (stats.sequences.size() != model_.size()) return "stats sequences";
    return "";
  }

  const Config config_;
  const uint64_t seed_;
  std::mt19937_64 rng_;
  PagePool pool_;
  std::unique_ptr<AllocationPolicy> policy_;
  SequenceTable table_;
  Model model_;
  std::vector<uint64_t> storage_;  // [num_cells] stamp held by each cell
  std::vector<uint64_t> seen_;     // [num_cells] op mark, for distinct count
  uint64_t next_stamp_ = 1;
  int op_index_ = 0;
  uint64_t sum_used_pages_ = 0;
  int num_append_exhausted_ = 0;
  int num_remove_exhausted_ = 0;
  std::ostringstream desc_;
};

class SequenceTablePropertyTest : public ::testing::TestWithParam<Config> {};

TEST_P(SequenceTablePropertyTest, MatchesReferenceModel) {
  const Config& config = GetParam();
  const uint64_t seed = BaseSeed() * 1000 + config.page_size +
                        (std::string(config.policy) == "paged" ? 0 : 500);
  const auto start = std::chrono::steady_clock::now();
  PropertyRun run(config, seed);
  const std::string error = run.Run(kOpsPerConfig);
  ASSERT_EQ(error, "") << "reproduce with KVAULT_PROPERTY_SEED=" << BaseSeed();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // The pool is sized so that running out of room is exercised too.
  EXPECT_GT(run.num_append_exhausted(), 50) << "seed=" << seed;
  std::printf(
      "  %d ops, %d Append / %d RemoveRange ResourceExhausted, "
      "mean occupancy %.2f, %.2f s (seed %llu)\n",
      kOpsPerConfig, run.num_append_exhausted(), run.num_remove_exhausted(),
      run.mean_occupancy(), secs, static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(PageSizesAndPolicies, SequenceTablePropertyTest,
                         ::testing::Values(Config{1, 400, "paged"},
                                           Config{16, 24, "paged"},
                                           Config{256, 6, "paged"},
                                           Config{1, 400, "contiguous"},
                                           Config{16, 24, "contiguous"},
                                           Config{256, 6, "contiguous"}),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return std::string(info.param.policy) + "_page" +
                                  std::to_string(info.param.page_size);
                         });

}  // namespace
}  // namespace kvault
