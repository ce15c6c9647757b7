#include "bench/scenarios/defrag_cost.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvault::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The byte every K (side 0) or V (side 1) row of (seq, index, layer) holds;
// neighbours in any of the four coordinates differ.
uint8_t PatternByte(uint32_t seq, uint64_t index, uint32_t layer, int side) {
  return static_cast<uint8_t>(seq * 131 + index * 7 + layer * 3 + side + 1);
}

void FillSequence(KvCache& cache, SeqId seq) {
  KvStorage& storage = *cache.storage();
  const uint32_t num_layers = storage.layout().num_layers;
  const uint64_t length = cache.table().Length(seq);
  for (uint64_t i = 0; i < length; ++i) {
    const CellId cell = cache.table().CellAt(seq, i);
    for (uint32_t l = 0; l < num_layers; ++l) {
      std::span<std::byte> k = storage.Rows(KvSide::kK, l, cell);
      std::span<std::byte> v = storage.Rows(KvSide::kV, l, cell);
      std::memset(k.data(), PatternByte(seq.value(), i, l, 0), k.size());
      std::memset(v.data(), PatternByte(seq.value(), i, l, 1), v.size());
    }
  }
}

bool RowHolds(std::span<const std::byte> row, uint8_t byte) {
  for (std::byte b : row) {
    if (static_cast<uint8_t>(b) != byte) return false;
  }
  return true;
}

// Returns the sequences to remove: `big` consecutive ones in the middle (the
// largest free run) and `scattered` single ones, evenly spaced over the rest
// and never adjacent to each other or to the run.
StatusOr<std::vector<uint32_t>> PickVictims(uint32_t num_seqs, uint32_t big,
                                            uint32_t scattered) {
  const uint32_t start = (num_seqs - big) / 2;
  std::vector<uint32_t> victims;
  std::vector<uint32_t> candidates;
  for (uint32_t s = 0; s < num_seqs; ++s) {
    if (s >= start && s < start + big) {
      victims.push_back(s);
    } else if (big == 0 || (s + 1 != start && s != start + big)) {
      candidates.push_back(s);
    }
  }
  if (uint64_t{scattered} * 2 > candidates.size()) {
    return InvalidArgumentError(
        "defrag-cost: " + std::to_string(scattered) + " holes do not fit " +
        "apart among " + std::to_string(candidates.size()) +
        " sequences; lower the free fraction or the fragmentation");
  }
  const double step = static_cast<double>(candidates.size()) / scattered;
  for (uint32_t j = 0; j < scattered; ++j) {
    victims.push_back(candidates[static_cast<size_t>((j + 0.5) * step)]);
  }
  return victims;
}

// Copies `bytes` bytes between two touched buffers of at most 256 MiB
// (larger than any last-level cache here) and returns the milliseconds: the
// best of three rounds, the machine's bound rather than its noise.
double TimeMemcpy(uint64_t bytes) {
  if (bytes == 0) return 0;
  const uint64_t chunk = std::min<uint64_t>(bytes, uint64_t{256} << 20);
  std::vector<char> src(chunk, 1), dst(chunk, 2);
  std::memcpy(dst.data(), src.data(), chunk);  // warm-up: fault pages in
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const Clock::time_point t0 = Clock::now();
    for (uint64_t done = 0; done < bytes; done += chunk) {
      std::memcpy(dst.data(), src.data(), std::min(chunk, bytes - done));
    }
    const double ms = MsSince(t0);
    if (round == 0 || ms < best) best = ms;
  }
  volatile char sink = dst[chunk - 1];
  (void)sink;
  return best;
}

}  // namespace

StatusOr<FragmentedPool> BuildFragmentedPool(const FragmentedPoolSpec& spec) {
  KV_RETURN_IF_ERROR(spec.layout.Validate());
  if (!(spec.free_fraction > 0 && spec.free_fraction < 1) ||
      !(spec.target_fragmentation >= 0 && spec.target_fragmentation < 1) ||
      spec.seq_pages == 0) {
    return InvalidArgumentError(
        "defrag-cost: need free fraction in (0, 1), fragmentation in [0, 1) "
        "and seq_pages >= 1");
  }
  const uint64_t seq_bytes =
      spec.layout.cell_bytes() * spec.page_size * spec.seq_pages;
  const uint64_t num_seqs = spec.pool_bytes / seq_bytes;
  if (num_seqs < 4 || num_seqs * spec.seq_pages > UINT32_MAX) {
    return InvalidArgumentError("defrag-cost: a pool of " +
                                std::to_string(spec.pool_bytes) +
                                " bytes holds " + std::to_string(num_seqs) +
                                " sequences; need 4 .. 2^32 pages");
  }
  KvCacheOptions options;
  options.num_pages = static_cast<uint32_t>(num_seqs * spec.seq_pages);
  options.page_size = spec.page_size;
  options.policy = KvPolicy::kPaged;
  options.layout = spec.layout;
  FragmentedPool result;
  KV_ASSIGN_OR_RETURN(result.cache, KvCache::Create(options));
  result.num_sequences = static_cast<uint32_t>(num_seqs);
  const uint64_t seq_cells = uint64_t{spec.page_size} * spec.seq_pages;
  std::vector<TokenPos> tokens(seq_cells);
  for (uint64_t i = 0; i < seq_cells; ++i) {
    tokens[i] = {static_cast<TokenId>(i), static_cast<Pos>(i)};
  }
  for (uint32_t s = 0; s < num_seqs; ++s) {
    KV_RETURN_IF_ERROR(result.cache->Append(SeqId(s), tokens).status());
    FillSequence(*result.cache, SeqId(s));
  }
  const uint32_t num_free = std::max<uint32_t>(
      1, static_cast<uint32_t>(std::lround(spec.free_fraction * num_seqs)));
  uint32_t big = static_cast<uint32_t>(
      std::lround((1 - spec.target_fragmentation) * num_free));
  big = std::clamp<uint32_t>(big, 1, num_free);
  KV_ASSIGN_OR_RETURN(std::vector<uint32_t> victims,
                      PickVictims(result.num_sequences, big, num_free - big));
  for (uint32_t s : victims) result.cache->RemoveSequence(SeqId(s));
  result.num_removed = static_cast<uint32_t>(victims.size());
  return result;
}

Status VerifyPatterns(const KvCache& cache) {
  const KvStorage& storage = *cache.storage();
  const uint32_t num_layers = storage.layout().num_layers;
  for (SeqId seq : cache.table().SequenceIds()) {
    const uint64_t length = cache.table().Length(seq);
    for (uint64_t i = 0; i < length; ++i) {
      const CellId cell = cache.table().CellAt(seq, i);
      for (uint32_t l = 0; l < num_layers; ++l) {
        if (!RowHolds(storage.Rows(KvSide::kK, l, cell),
                      PatternByte(seq.value(), i, l, 0)) ||
            !RowHolds(storage.Rows(KvSide::kV, l, cell),
                      PatternByte(seq.value(), i, l, 1))) {
          return CorruptionError(
              "defrag-cost: seq " + std::to_string(seq.value()) + " index " +
              std::to_string(i) + " layer " + std::to_string(l) +
              ": K/V row does not hold its pattern");
        }
      }
    }
  }
  return Status::Ok();
}

StatusOr<DefragCostResult> RunDefragCost(const DefragCostOptions& options) {
  const FragmentedPoolSpec& spec = options.spec;
  const Clock::time_point t0 = Clock::now();
  KV_ASSIGN_OR_RETURN(FragmentedPool pool, BuildFragmentedPool(spec));
  DefragCostResult r;
  r.setup_ms = MsSince(t0);
  const PoolStats before = pool.cache->Stats();
  r.pool_bytes = before.num_cells * spec.layout.cell_bytes();
  r.layout = spec.layout.ToString();
  r.page_size = spec.page_size;
  r.num_sequences = pool.num_sequences;
  r.free_fraction = static_cast<double>(before.free_cells) / before.num_cells;
  r.target_fragmentation = spec.target_fragmentation;
  r.fragmentation = before.fragmentation;
  const DefragReport report = pool.cache->Defrag();
  r.fragmentation_after = pool.cache->Stats().fragmentation;
  r.defrag_ms = report.elapsed_ms;
  r.num_moves = report.num_moves;
  r.cells_moved = report.cells_moved;
  r.bytes_moved = report.cells_moved * spec.layout.cell_bytes();
  r.defrag_gbps = r.defrag_ms > 0 ? r.bytes_moved / r.defrag_ms / 1e6 : 0;
  r.memcpy_ms = TimeMemcpy(r.bytes_moved);
  r.memcpy_gbps = r.memcpy_ms > 0 ? r.bytes_moved / r.memcpy_ms / 1e6 : 0;
  if (options.verify) {
    KV_RETURN_IF_ERROR(VerifyPatterns(*pool.cache));
    r.verified = true;
  }
  return r;
}

std::string DefragCostJson(const DefragCostResult& r) {
  nlohmann::ordered_json j;
  j["pool_mib"] = static_cast<double>(r.pool_bytes) / 1048576.0;
  j["pool_bytes"] = r.pool_bytes;
  j["layout"] = r.layout;
  j["page_size"] = r.page_size;
  j["num_sequences"] = r.num_sequences;
  j["free_fraction"] = r.free_fraction;
  j["target_fragmentation"] = r.target_fragmentation;
  j["fragmentation"] = r.fragmentation;
  j["fragmentation_after"] = r.fragmentation_after;
  j["setup_ms"] = r.setup_ms;
  j["defrag_ms"] = r.defrag_ms;
  j["num_moves"] = r.num_moves;
  j["cells_moved"] = r.cells_moved;
  j["bytes_moved"] = r.bytes_moved;
  j["defrag_gbps"] = r.defrag_gbps;
  j["memcpy_ms"] = r.memcpy_ms;
  j["memcpy_gbps"] = r.memcpy_gbps;
  j["verified"] = r.verified;
  return j.dump();
}

}  // namespace kvault::bench
