// Test helpers for state files and anything that moves a sequence's KV in and
// out of a cache (state_file tests, spill tiers): build caches filled with
// seeded random K/V bytes, fragment a pool, and snapshot a whole cache
// (table, pool refcounts, every used cell's bytes) to prove that a failed
// operation left it byte-for-byte unchanged. Header-only; keep it stable.
#ifndef KVAULT_TESTS_KV_STATE_TEST_UTIL_H_
#define KVAULT_TESTS_KV_STATE_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/memory_file.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"

namespace kvault::state_test {

// The fingerprint tests save and restore under.
inline constexpr ModelFingerprint kTestFingerprint{0x0123456789abcdefULL,
                                                   0xfedcba9876543210ULL};

// Returns a small layout: 2 layers x 2 KV heads x 32/32 (512 B/cell in f16).
inline KvLayout SmallLayout(KvDtype dtype = KvDtype::kF16) {
  return KvLayout{2, 2, 32, 32, dtype};
}

// Returns a cache of `num_pages` pages of `page_size` cells with `layout`;
// aborts on a bad configuration (a test bug).
inline std::unique_ptr<KvCache> MakeCache(const KvLayout& layout,
                                          uint32_t num_pages,
                                          uint32_t page_size,
                                          KvPolicy policy = KvPolicy::kPaged) {
  KvCacheOptions options;
  options.num_pages = num_pages;
  options.page_size = page_size;
  options.policy = policy;
  options.layout = layout;
  StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(options);
  KV_CHECK(cache.ok()) << cache.status();
  return std::move(cache).value();
}

// Returns `num_tokens` tokens with seeded random ids and positions
// first_pos, first_pos + 1, ...
inline std::vector<TokenPos> RandomTokens(uint64_t num_tokens, uint64_t seed,
                                          Pos first_pos = 0) {
  std::mt19937_64 rng(seed);
  std::vector<TokenPos> tokens(num_tokens);
  for (uint64_t i = 0; i < num_tokens; ++i) {
    tokens[i] = {static_cast<TokenId>(rng() % 200000),
                 first_pos + static_cast<Pos>(i)};
  }
  return tokens;
}

// Overwrites every K and V row of `cells` (all layers) with seeded random
// bytes. Raw bytes, so f16/q8_0 rows may hold NaNs: compare bytes, not floats.
inline void FillRandomRows(KvCache* cache, std::span<const CellId> cells,
                           uint64_t seed) {
  KvStorage* storage = cache->storage();
  KV_CHECK(storage != nullptr);
  std::mt19937_64 rng(seed);
  auto fill = [&rng](std::span<std::byte> row) {
    for (size_t i = 0; i < row.size(); i += 8) {
      const uint64_t word = rng();
      std::memcpy(row.data() + i, &word, std::min<size_t>(8, row.size() - i));
    }
  };
  for (CellId cell : cells) {
    for (uint32_t layer = 0; layer < storage->layout().num_layers; ++layer) {
      fill(storage->Rows(KvSide::kK, layer, cell));
      fill(storage->Rows(KvSide::kV, layer, cell));
    }
  }
}

// Appends `num_tokens` random tokens to `seq` and fills their rows with
// random bytes; aborts when the cache has no room (a test bug).
inline void AppendRandom(KvCache* cache, SeqId seq, uint64_t num_tokens,
                         uint64_t seed) {
  const Pos first_pos = static_cast<Pos>(cache->table().Length(seq));
  StatusOr<std::vector<CellId>> cells =
      cache->Append(seq, RandomTokens(num_tokens, seed, first_pos));
  KV_CHECK(cells.ok()) << cells.status();
  FillRandomRows(cache, *cells, seed ^ 0x9e3779b97f4a7c15ULL);
}

// Fills every free page with a one-page filler sequence (ids first_filler,
// first_filler + 1, ...), then removes the fillers on even pages: the free
// space is left as single-page holes between used pages. Returns the ids of
// the fillers that remain.
inline std::vector<SeqId> FragmentPool(KvCache* cache, uint32_t first_filler,
                                       uint64_t seed) {
  const uint32_t page_size = cache->pool().page_size();
  std::vector<SeqId> fillers;
  for (uint32_t id = first_filler; cache->pool().num_free_pages() > 0; ++id) {
    AppendRandom(cache, SeqId(id), page_size, seed + id);
    fillers.push_back(SeqId(id));
  }
  std::vector<SeqId> kept;
  for (SeqId s : fillers) {
    if (cache->table().Pages(s)[0].value() % 2 == 0) {
      cache->RemoveSequence(s);
    } else {
      kept.push_back(s);
    }
  }
  return kept;
}

// Returns the bytes of one cell: K then V row of every layer in turn.
inline std::string CellBytes(const KvStorage& storage, CellId cell) {
  std::string out;
  for (uint32_t layer = 0; layer < storage.layout().num_layers; ++layer) {
    for (std::span<const std::byte> row :
         {storage.Rows(KvSide::kK, layer, cell),
          storage.Rows(KvSide::kV, layer, cell)}) {
      out.append(reinterpret_cast<const char*>(row.data()), row.size());
    }
  }
  return out;
}

// Returns the bytes of `seq`'s cells in logical order (CellBytes each).
inline std::string SequenceBytes(const KvCache& cache, SeqId seq) {
  std::string out;
  for (uint64_t i = 0; i < cache.table().Length(seq); ++i) {
    out += CellBytes(*cache.storage(), cache.table().CellAt(seq, i));
  }
  return out;
}

// Everything observable about a cache's contents.
struct CacheSnapshot {
  std::map<SeqId, std::vector<PageId>> pages;
  std::map<SeqId, std::vector<TokenPos>> cells;
  std::vector<uint32_t> refcounts;             // [num_pages]
  std::map<uint64_t, std::string> cell_bytes;  // used cell -> CellBytes
};

// Captures `cache`'s table, pool refcounts and every used cell's bytes.
inline CacheSnapshot TakeSnapshot(const KvCache& cache) {
  CacheSnapshot snap;
  const SequenceTable& table = cache.table();
  for (SeqId seq : table.SequenceIds()) {
    std::span<const PageId> pages = table.Pages(seq);
    std::span<const TokenPos> cells = table.Cells(seq);
    snap.pages[seq].assign(pages.begin(), pages.end());
    snap.cells[seq].assign(cells.begin(), cells.end());
    if (cache.storage() == nullptr) continue;
    for (uint64_t i = 0; i < cells.size(); ++i) {
      const CellId cell = table.CellAt(seq, i);
      snap.cell_bytes.emplace(cell.value(), CellBytes(*cache.storage(), cell));
    }
  }
  for (uint32_t p = 0; p < cache.pool().num_pages(); ++p) {
    snap.refcounts.push_back(cache.pool().RefCount(PageId(p)));
  }
  return snap;
}

// Returns "" when the snapshots are equal, else the first difference.
inline std::string DiffSnapshots(const CacheSnapshot& want,
                                 const CacheSnapshot& got) {
  std::ostringstream os;
  if (want.pages != got.pages) {
    os << "page lists differ (" << want.pages.size() << " vs "
       << got.pages.size() << " sequences)";
  } else if (want.cells != got.cells) {
    os << "token/pos lists differ";
  } else if (want.refcounts != got.refcounts) {
    for (size_t p = 0; p < want.refcounts.size(); ++p) {
      if (want.refcounts[p] != got.refcounts[p]) {
        os << "page#" << p << " refcount " << want.refcounts[p] << " -> "
           << got.refcounts[p];
        break;
      }
    }
  } else if (want.cell_bytes != got.cell_bytes) {
    for (const auto& [cell, bytes] : want.cell_bytes) {
      auto it = got.cell_bytes.find(cell);
      if (it == got.cell_bytes.end() || it->second != bytes) {
        os << "bytes of used cell#" << cell << " changed";
        break;
      }
    }
  }
  return os.str();
}

// Returns `snap` as it would be without `seq` (on a pool of `page_size`
// cells a page): its lists gone, its page references dropped, and the bytes
// of cells on pages no other sequence holds forgotten.
inline CacheSnapshot SnapshotWithout(CacheSnapshot snap, SeqId seq,
                                     uint32_t page_size) {
  for (PageId page : snap.pages[seq]) {
    if (--snap.refcounts[page.value()] > 0) continue;
    const uint64_t first = uint64_t{page.value()} * page_size;
    for (uint64_t cell = first; cell < first + page_size; ++cell) {
      snap.cell_bytes.erase(cell);
    }
  }
  snap.pages.erase(seq);
  snap.cells.erase(seq);
  return snap;
}

// Saves `seq` into a string with WriteSequenceState; aborts on failure.
inline std::string SaveToString(const KvCache& cache, SeqId seq,
                                const SaveOptions& options = {},
                                const ModelFingerprint& fp = kTestFingerprint) {
  std::string bytes;
  StringWritableFile out(&bytes);
  StatusOr<uint64_t> written =
      WriteSequenceState(cache, seq, fp, options, &out);
  KV_CHECK(written.ok()) << written.status();
  KV_CHECK_EQ(*written, bytes.size());
  return bytes;
}

// Returns a RandomAccessFile over a copy of `bytes`.
inline std::unique_ptr<RandomAccessFile> StringFile(std::string bytes) {
  return std::make_unique<StringRandomAccessFile>(
      std::make_shared<const std::string>(std::move(bytes)));
}

}  // namespace kvault::state_test

#endif  // KVAULT_TESTS_KV_STATE_TEST_UTIL_H_
