// libFuzzer target for the state-file reader. Every input goes through
// ReadStateHeader and then RestoreSequence into a small paged cache that
// already holds other sequences with known bytes; the target checks the
// transactional contract of state_file.h on every input:
//   - failure: every sequence (cells and K/V bytes) is exactly as before,
//     the target included, and no scratch sequence is left behind;
//   - success: the target holds the file's tokens and bytes, the others are
//     untouched.
// A header that ReadStateHeader accepts supplies the cache's layout and
// fingerprint, so mutated files get past checks 8-10 and reach the data; a
// second run with repaired checksums gets mutations past checks 3 and 11-13.
// The repaired bytes also go through the prefix store as a page record's
// state file (FuzzAsPageRecord).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/memory_file.h"
#include "kv/kv_cache.h"
#include "kv/mem_page_store.h"
#include "kv/page_record.h"
#include "kv/prefix_store.h"
#include "kv/state_file.h"
#include "kv/state_format.h"
#include "fuzz_assert.h"


namespace kvault {
namespace {

constexpr uint32_t kPageSize = 16;
// Larger files are skipped (libFuzzer's -max_len keeps inputs far smaller).
constexpr uint64_t kMaxRestoreBytes = uint64_t{4} << 20;
// A header with 0 tokens can still name a huge layout; cap the pool.
constexpr uint64_t kMaxPoolBytes = uint64_t{8} << 20;
// Repaired inputs are resized to their header's length up to this size.
constexpr uint64_t kMaxRepairedBytes = uint64_t{1} << 20;

constexpr SeqId kOther{1};      // known data, must never change
constexpr SeqId kFiller{2};     // its pages sit between the holes
constexpr SeqId kTarget{3};     // restored into; has old contents
constexpr SeqId kEvictable{4};  // what make_room evicts (tight pools)
constexpr SeqId kHole{5};       // allocated, then removed to leave holes
constexpr uint64_t kOtherTokens = 20;
constexpr uint64_t kTargetTokens = 5;

// The cache used when the header is invalid (the restore must fail early).
KvLayout DefaultLayout() {
  KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = 2;
  layout.head_dim_k = 32;
  layout.head_dim_v = 32;
  layout.dtype = KvDtype::kF16;
  return layout;
}

// What the input asks of the cache.
struct CacheShape {
  KvLayout layout;
  uint64_t restore_tokens = 0;
  // The pool is one page short until make_room evicts kEvictable.
  bool tight = false;
  // The target's old cells share kOther's pages (copy-on-write).
  bool target_shares_other = false;
};

uint64_t PagesFor(uint64_t num_tokens) {
  return (num_tokens + kPageSize - 1) / kPageSize;
}

// Fills `seq`'s K/V rows with bytes that depend on seq, cell index, layer.
void FillKnownBytes(KvCache* cache, SeqId seq) {
  KvStorage* storage = cache->storage();
  uint64_t n = cache->table().Length(seq);
  for (uint64_t i = 0; i < n; ++i) {
    CellId cell = cache->table().CellAt(seq, i);
    for (uint32_t l = 0; l < storage->layout().num_layers; ++l) {
      uint64_t x = (uint64_t{seq.value()} << 48) ^ (i << 16) ^ l;
      for (std::span<std::byte> row : {storage->Rows(KvSide::kK, l, cell),
                                       storage->Rows(KvSide::kV, l, cell)}) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        for (size_t j = 0; j < row.size(); j += 8) {
          const uint64_t v = x + j;
          std::memcpy(row.data() + j, &v, std::min<size_t>(8, row.size() - j));
        }
      }
    }
  }
}

// Appends `num_tokens` tokens (positions continuing the sequence) to `seq`.
void AppendTokens(KvCache* cache, SeqId seq, uint64_t num_tokens) {
  uint64_t first = cache->table().Length(seq);
  std::vector<TokenPos> tokens(num_tokens);
  for (uint64_t i = 0; i < num_tokens; ++i) {
    tokens[i] = TokenPos{static_cast<TokenId>(1000 * seq.value() + first + i),
                         static_cast<Pos>(first + i)};
  }
  FUZZ_ASSERT(cache->Append(seq, tokens).ok());
}

// Builds a paged cache whose free pages are single-page holes between
// kFiller's pages, exactly as many as the restore needs (one fewer, plus
// kEvictable's page, when tight).
std::unique_ptr<KvCache> BuildCache(const CacheShape& shape) {
  uint64_t needed = PagesFor(shape.restore_tokens);
  uint64_t num_pages =
      PagesFor(kOtherTokens) + 2 * needed +
      (shape.target_shares_other ? 0 : PagesFor(kTargetTokens));
  KvCacheOptions options;
  options.num_pages = static_cast<uint32_t>(num_pages);
  options.page_size = kPageSize;
  options.policy = KvPolicy::kPaged;
  options.layout = shape.layout;
  StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(options);
  FUZZ_ASSERT(cache.ok());
  KvCache* c = cache->get();
  AppendTokens(c, kOther, kOtherTokens);
  FillKnownBytes(c, kOther);
  if (shape.target_shares_other) {
    FUZZ_ASSERT(c->CopySequence(kOther, kTarget).ok());
  } else {
    AppendTokens(c, kTarget, kTargetTokens);
    FillKnownBytes(c, kTarget);
  }
  for (uint64_t i = 0; i < needed; ++i) {
    AppendTokens(c, (shape.tight && i == 0) ? kEvictable : kHole, kPageSize);
    AppendTokens(c, kFiller, kPageSize);
  }
  FillKnownBytes(c, kFiller);
  if (shape.tight) FillKnownBytes(c, kEvictable);
  c->RemoveSequence(kHole);
  return std::move(*cache);
}

// One sequence as it was: its cells and, per cell, K then V of every layer.
struct SeqSnapshot {
  std::vector<TokenPos> cells;
  std::string bytes;  // [num_cells, cell_bytes]
  friend bool operator==(const SeqSnapshot&, const SeqSnapshot&) = default;
};

SeqSnapshot Snapshot(const KvCache& cache, SeqId seq) {
  SeqSnapshot snap;
  std::span<const TokenPos> cells = cache.table().Cells(seq);
  snap.cells.assign(cells.begin(), cells.end());
  const KvStorage& storage = *cache.storage();
  for (uint64_t i = 0; i < cells.size(); ++i) {
    CellId cell = cache.table().CellAt(seq, i);
    for (uint32_t l = 0; l < storage.layout().num_layers; ++l) {
      for (std::span<const std::byte> row :
           {storage.Rows(KvSide::kK, l, cell),
            storage.Rows(KvSide::kV, l, cell)}) {
        snap.bytes.append(reinterpret_cast<const char*>(row.data()),
                          row.size());
      }
    }
  }
  return snap;
}

// Every sequence but kEvictable (make_room may legitimately remove it).
std::map<SeqId, SeqSnapshot> SnapshotAll(const KvCache& cache) {
  std::map<SeqId, SeqSnapshot> all;
  for (SeqId seq : cache.table().SequenceIds()) {
    if (seq != kEvictable) all[seq] = Snapshot(cache, seq);
  }
  return all;
}

// Checks that the target holds exactly the file's token table and rows.
void CheckTargetMatchesFile(const KvCache& cache, const StateHeader& header,
                            const std::string& file) {
  const SequenceTable& table = cache.table();
  FUZZ_ASSERT(table.Length(kTarget) == header.num_tokens);
  std::span<const TokenPos> cells = table.Cells(kTarget);
  for (uint64_t g = 0; g < header.num_tokens; ++g) {
    int32_t rec[2];
    std::memcpy(rec, file.data() + kStateHeaderBytes + 8 * g, sizeof(rec));
    FUZZ_ASSERT(cells[g].token == rec[0] && cells[g].pos == rec[1]);
  }
  const KvStorage& storage = *cache.storage();
  const KvLayout& layout = header.layout;
  for (uint64_t c = 0; c < header.num_chunks(); ++c) {
    uint64_t t = header.chunk_tokens(c);
    const char* p = file.data() + header.chunk_offset(c);
    for (uint32_t l = 0; l < layout.num_layers; ++l) {
      for (bool is_k : {true, false}) {
        uint64_t row_bytes = is_k ? layout.k_row_bytes() : layout.v_row_bytes();
        for (uint64_t i = 0; i < t; ++i, p += row_bytes) {
          CellId cell = table.CellAt(kTarget, c * header.tokens_per_chunk + i);
          std::span<const std::byte> row =
              is_k ? storage.Rows(KvSide::kK, l, cell)
                   : storage.Rows(KvSide::kV, l, cell);
          FUZZ_ASSERT(std::memcmp(row.data(), p, row_bytes) == 0);
        }
      }
    }
  }
}

// Picks the cache for this input, or returns false to skip the restore.
bool ChooseShape(const StatusOr<StateHeader>& header, CacheShape* shape) {
  shape->layout = DefaultLayout();
  if (!header.ok()) return true;
  const KvLayout& layout = header->layout;
  // The format admits rows of up to 1024 x 16384 values, KvLayout only
  // kMaxRowElems: no cache has such a layout, so the restore must fail.
  if (!layout.Validate().ok()) return true;
  uint64_t n = header->num_tokens;
  uint64_t cell_bytes = layout.cell_bytes();
  uint64_t num_cells = kPageSize * (2 * PagesFor(n) + 3);
  if (n > kMaxRestoreBytes || n * cell_bytes > kMaxRestoreBytes ||
      num_cells * cell_bytes > kMaxPoolBytes) {
    return false;
  }
  shape->layout = layout;
  shape->restore_tokens = n;
  shape->tight = n % 2 == 1;  // deterministic per input, seeds have both
  shape->target_shares_other = (n / 2) % 2 == 1;
  return true;
}

// Returns `raw` with every checksum (and the trailer) recomputed, resized to
// the length its header implies, so that mutated header fields and chunk
// bytes reach the checks behind the checksums. Returns `raw` unchanged when
// it has no room for a header or its header decodes to an oversized file.
std::string RepairChecksums(const std::string& raw) {
  std::string f = raw;
  if (f.size() < kStateHeaderBytes) return f;
  auto* b = reinterpret_cast<std::byte*>(f.data());
  const uint64_t header_sum = Xxh3_64(b, kStateHeaderBytes - 8);
  StoreLe64(b + kStateHeaderBytes - 8, header_sum);
  StatusOr<StateHeader> h = DecodeHeader({b, kStateHeaderBytes});
  if (!h.ok() || h->file_bytes() > kMaxRepairedBytes) return f;
  f.resize(h->file_bytes());
  b = reinterpret_cast<std::byte*>(f.data());
  const uint64_t table_bytes = h->num_tokens * kStateTokenRecordBytes;
  std::vector<uint64_t> sums = {header_sum,
                                Xxh3_64(b + kStateHeaderBytes, table_bytes)};
  StoreLe64(b + kStateHeaderBytes + table_bytes, sums.back());
  const uint64_t cell_bytes = h->layout.cell_bytes();
  for (uint64_t c = 0; c < h->num_chunks(); ++c) {
    const uint64_t payload_bytes = h->chunk_tokens(c) * cell_bytes;
    std::byte* payload = b + h->chunk_offset(c);
    sums.push_back(ChunkChecksum({payload, payload_bytes}, c));
    StoreLe64(payload + payload_bytes, sums.back());
  }
  std::vector<std::byte> le(8 * sums.size());  // [num_sums, 8]
  for (size_t i = 0; i < sums.size(); ++i) StoreLe64(&le[8 * i], sums[i]);
  StateTrailer trailer{h->file_bytes(), Xxh3_64(le)};
  std::array<std::byte, kStateTrailerBytes> t = EncodeTrailer(trailer);
  std::memcpy(b + f.size() - kStateTrailerBytes, t.data(), t.size());
  return f;
}

// STATE_FUZZ_VERBOSE=1 prints each input's outcome (for triage).
bool Verbose() {
  static const bool verbose = std::getenv("STATE_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void FuzzOne(std::shared_ptr<const std::string> bytes) {
  const size_t size = bytes->size();
  StringRandomAccessFile file(bytes);
  StatusOr<StateHeader> header = ReadStateHeader(file);
  if (header.ok()) FUZZ_ASSERT(header->file_bytes() == size);
  CacheShape shape;
  if (!ChooseShape(header, &shape)) return;
  std::unique_ptr<KvCache> cache = BuildCache(shape);
  std::map<SeqId, SeqSnapshot> before = SnapshotAll(*cache);
  int make_room_calls = 0;
  RestoreOptions options;
  options.make_room = [&](uint64_t num_tokens) {
    ++make_room_calls;
    FUZZ_ASSERT(num_tokens == shape.restore_tokens);
    cache->RemoveSequence(kEvictable);
    return Status::Ok();
  };
  ModelFingerprint fingerprint =
      header.ok() ? header->fingerprint : ModelFingerprint{1, 2};
  StatusOr<RestoreResult> result =
      RestoreSequence(file, fingerprint, kTarget, cache.get(), options);
  FUZZ_ASSERT(make_room_calls <= (shape.tight ? 1 : 0));
  FUZZ_ASSERT(CheckInvariants(cache->table()).ok());
  FUZZ_ASSERT(!cache->table().Contains(kRestoreScratchSeq));
  std::map<SeqId, SeqSnapshot> after = SnapshotAll(*cache);
  if (Verbose()) {
    std::fprintf(stderr, "state_file_fuzz: %zu bytes, tight=%d shared=%d: %s\n",
                 size, shape.tight, shape.target_shares_other,
                 result.ok() ? "restored" : result.status().ToString().c_str());
  }
  if (!result.ok()) {
    // The pool always has exactly the room a valid file needs.
    FUZZ_ASSERT(result.status().code() != StatusCode::kResourceExhausted);
    FUZZ_ASSERT(after == before);
    return;
  }
  FUZZ_ASSERT(header.ok() && header->layout == shape.layout);
  FUZZ_ASSERT(result->num_tokens == header->num_tokens);
  FUZZ_ASSERT(result->bytes_read <= size);
  CheckTargetMatchesFile(*cache, *header, *bytes);
  after.erase(kTarget);
  before.erase(kTarget);
  FUZZ_ASSERT(after == before);
}

// The same bytes as the state file inside a prefix-store page record,
// wrapped in a valid record header and loaded by PrefixStore::Extend into a
// new sequence. Whatever the bytes, the load takes exactly one page (only
// when the file holds exactly the page's tokens) or nothing, leaves every
// other sequence and no holding sequence behind, and a refused record is
// gone from the store.
void FuzzAsPageRecord(std::shared_ptr<const std::string> bytes) {
  StringRandomAccessFile file(bytes);
  StatusOr<StateHeader> header = ReadStateHeader(file);
  CacheShape shape;
  if (!ChooseShape(header, &shape)) return;
  std::unique_ptr<KvCache> cache = BuildCache(shape);
  const std::map<SeqId, SeqSnapshot> before = SnapshotAll(*cache);
  // The page asked for: the file's own tokens when it holds one page (so
  // valid files load), else made up.
  std::vector<TokenPos> wanted(kPageSize + 1);
  for (uint32_t i = 0; i <= kPageSize; ++i) wanted[i] = {TokenId(i), Pos(i)};
  if (header.ok() && header->num_tokens == kPageSize) {
    std::vector<std::byte> table(kPageSize * kStateTokenRecordBytes);
    if (file.ReadAt(kStateHeaderBytes, table).ok()) {
      DecodeTokenRecords(table, std::span(wanted).first(kPageSize));
    }
  }
  const PageKey root{7, 7};
  const PageKey key = NextPageKey(root, std::span(wanted).first(kPageSize));
  const auto record_header = EncodePageRecordHeader({key, root, bytes->size()});
  std::string record(reinterpret_cast<const char*>(record_header.data()),
                     record_header.size());
  record += *bytes;
  auto mem = std::make_unique<MemPageStore>();
  MemPageStore* records = mem.get();
  FUZZ_ASSERT(mem->Put(key, record).ok());
  const ModelFingerprint fingerprint =
      header.ok() ? header->fingerprint : ModelFingerprint{1, 2};
  PrefixStore store(SingleTier(std::move(mem)), fingerprint, root,
                    SaveOptions{});
  const SeqId seq{6};
  const uint64_t got = store.Extend(cache.get(), seq, wanted, 0, kPageSize);
  FUZZ_ASSERT(got == 0 || got == kPageSize);
  FUZZ_ASSERT(cache->table().Length(seq) == got);
  FUZZ_ASSERT(CheckInvariants(cache->table()).ok());
  FUZZ_ASSERT(!cache->table().Contains(kPrefixLoadSeq));
  if (got == kPageSize) {
    const std::span<const TokenPos> cells = cache->table().Cells(seq);
    FUZZ_ASSERT(std::equal(cells.begin(), cells.end(), wanted.begin()));
  }
  FUZZ_ASSERT(records->Contains(key) ==
              (store.Stats().tiers[0].bad_records == 0));
  std::map<SeqId, SeqSnapshot> after = SnapshotAll(*cache);
  after.erase(seq);
  FUZZ_ASSERT(after == before);
}

}  // namespace
}  // namespace kvault

// Runs each input as it is, then (when that changes it) with its checksums
// repaired: raw bytes test the integrity checks, repaired ones everything
// behind them.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto raw = std::make_shared<const std::string>(
      reinterpret_cast<const char*>(data), size);
  kvault::FuzzOne(raw);
  auto repaired =
      std::make_shared<const std::string>(kvault::RepairChecksums(*raw));
  if (*repaired != *raw) kvault::FuzzOne(repaired);
  kvault::FuzzAsPageRecord(repaired);
  return 0;
}
