// Reading, verifying and scattering a state file's K/V chunks for
// RestoreJob (restore_chunks.h).
#include "kv/restore_chunks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/checksum.h"
#include "core/mutex.h"
#include "core/stream_copy.h"
#include "kv/state_format.h"

namespace kvault::state_internal {
namespace {

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Returns the summary mismatch error of check 13, or OK.
Status CheckSummary(const ValidatedFile& v, uint64_t computed) {
  if (computed == v.trailer.summary_checksum) return Status::Ok();
  return CorruptionError(
             "summary checksum (trailer at offset " +
             std::to_string(v.header.file_bytes() - kStateTrailerBytes) +
             ") mismatch: stored " + Hex64(v.trailer.summary_checksum) +
             ", computed " + Hex64(computed))
      .WithReason(kReasonChecksumMismatch);
}

// Copied and hashed together in pieces this small, a piece is still in L1
// when the hash reads it.
constexpr uint64_t kFusedBytes = uint64_t{16} << 10;

// One loading thread's reader: pulls a chunk through its own buffer into
// the chunk's targets, hashing every payload byte on the way.
class ChunkReader {
 public:
  ChunkReader(const RandomAccessFile& file, const StateHeader& h)
      : file_(file),
        h_(h),
        buffer_(static_cast<std::byte*>(
            ::operator new[](kChunkReadBytes, std::align_val_t(4096)))) {}

  // Loads chunk `c` into `targets`; returns its stored checksum once the
  // computed one matches.
  StatusOr<uint64_t> Load(uint64_t c, const ChunkTargets& targets) {
    const uint64_t payload_bytes = h_.chunk_tokens(c) * h_.layout.cell_bytes();
    const uint64_t offset = h_.chunk_offset(c);
    hasher_.Reset(ChunkChecksumSeed(c));
    next_ = 0;
    at_ = 0;
    std::array<std::byte, kStateChecksumBytes> stored_bytes;
    for (uint64_t done = 0; done < payload_bytes + kStateChecksumBytes;) {
      const uint64_t n =
          std::min(kChunkReadBytes, payload_bytes + kStateChecksumBytes - done);
      KV_RETURN_IF_ERROR(ReadExact(file_, offset + done,
                                   std::span(buffer_.get(), n), Name(c)));
      const uint64_t to_payload =
          done < payload_bytes ? std::min(n, payload_bytes - done) : 0;
      CopyAndHash(targets, buffer_.get(), to_payload);
      for (uint64_t i = to_payload; i < n; ++i) {
        stored_bytes[done + i - payload_bytes] = buffer_[i];
      }
      done += n;
    }
    StreamingFence();  // the cells are complete before anyone is told
    const uint64_t stored = LoadLe64(stored_bytes.data());
    const uint64_t computed = hasher_.Digest();
    if (stored == computed) return stored;
    const uint64_t t0 = c * h_.tokens_per_chunk;
    return CorruptionError(Name(c) + " (file bytes " +
                           Range(offset, offset + payload_bytes + 8) +
                           ", tokens " + Range(t0, t0 + h_.chunk_tokens(c)) +
                           ") checksum mismatch: stored " + Hex64(stored) +
                           ", computed " + Hex64(computed))
        .WithReason(kReasonChecksumMismatch);
  }

 private:
  std::string Name(uint64_t c) const {
    return "chunk " + std::to_string(c) + " of " +
           std::to_string(h_.num_chunks());
  }

  // Copies `n` payload bytes from `from` to where the targets continue.
  void CopyAndHash(const ChunkTargets& targets, const std::byte* from,
                   uint64_t n) {
    while (n > 0) {
      KV_CHECK(next_ < targets.size()) << "chunk targets end early";
      if (at_ == targets[next_].size()) {  // also skips empty targets
        ++next_;
        at_ = 0;
        continue;
      }
      const uint64_t m =
          std::min({n, targets[next_].size() - at_, kFusedBytes});
      // The cells are read again only by later forward passes: stores that
      // skip the cache save memory bandwidth the other threads share.
      CopyStreaming(targets[next_].data() + at_, from, m);
      hasher_.Update(from, m);
      from += m;
      n -= m;
      at_ += m;
    }
  }

  const RandomAccessFile& file_;
  const StateHeader& h_;
  struct AlignedDelete {
    void operator()(std::byte* p) const {
      ::operator delete[](p, std::align_val_t(4096));
    }
  };
  std::unique_ptr<std::byte[], AlignedDelete> buffer_;  // [kChunkReadBytes]
  Xxh3Hasher hasher_;
  size_t next_ = 0;  // the target being filled
  uint64_t at_ = 0;  // bytes of it filled
};

// What the loading threads share: the next chunk to take, every chunk's
// stored checksum, and the first bad chunk.
class ChunkLoad {
 public:
  ChunkLoad(const RandomAccessFile& file, const StateHeader& h,
            const ChunkTargetsFn& targets_for)
      : file_(file),
        h_(h),
        targets_for_(targets_for),
        checksums_(h.num_chunks()),
        first_bad_(h.num_chunks()) {}

  // One thread's work: takes chunks in order until none is left or one
  // before them failed.
  void Work() {
    ChunkReader reader(file_, h_);
    ChunkTargets targets;
    for (;;) {
      const uint64_t c = next_.fetch_add(1);
      if (c >= h_.num_chunks() || c > first_bad_.load()) return;
      targets.clear();
      const uint64_t t0 = c * h_.tokens_per_chunk;
      targets_for_(t0, h_.chunk_tokens(c), &targets);
      StatusOr<uint64_t> stored = reader.Load(c, targets);
      if (stored.ok()) {
        checksums_[c] = *stored;
      } else {
        Fail(c, stored.status());
      }
    }
  }

  // Returns the first bad chunk's error, or OK with every checksum.
  Status Result(std::vector<uint64_t>* checksums) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    *checksums = std::move(checksums_);
    return Status::Ok();
  }

 private:
  void Fail(uint64_t c, const Status& status) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (c < first_bad_.load()) {
      first_bad_.store(c);
      error_ = status;
    }
  }

  const RandomAccessFile& file_;
  const StateHeader& h_;
  const ChunkTargetsFn& targets_for_;
  std::vector<uint64_t> checksums_;  // [chunk]; each written by one thread
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> first_bad_;  // num_chunks while none failed
  Mutex mu_;
  Status error_ GUARDED_BY(mu_);  // the error of chunk first_bad_
};

}  // namespace

Status LoadChunks(const RandomAccessFile& file, const ValidatedFile& v,
                  uint64_t token_checksum, const ChunkTargetsFn& targets_for,
                  uint32_t num_threads) {
  ChunkLoad load(file, v.header, targets_for);
  // The caller's thread works too; no thread goes without a chunk.
  const uint64_t num_workers =
      std::min<uint64_t>(num_threads, v.header.num_chunks());
  const uint64_t num_helpers = num_workers > 1 ? num_workers - 1 : 0;
  std::vector<std::thread> helpers;
  for (uint64_t i = 0; i < num_helpers; ++i) {
    try {
      helpers.emplace_back([&load] { load.Work(); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: the ones running do the work
    }
  }
  load.Work();
  for (std::thread& helper : helpers) helper.join();
  std::vector<uint64_t> checksums;
  KV_RETURN_IF_ERROR(load.Result(&checksums));
  return CheckSummary(
      v, SummaryChecksum(v.header_checksum, token_checksum, checksums));
}

void CellTargets(std::span<const PageId> pages, uint32_t page_size, uint64_t t0,
                 uint64_t t, KvStorage* storage, ChunkTargets* out) {
  std::vector<CellRun> runs;
  CollectCellRuns(pages, page_size, t0, t0 + t, &runs);
  const KvLayout& layout = storage->layout();
  for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
    for (KvSide side : {KvSide::kK, KvSide::kV}) {
      for (const CellRun& run : runs) {
        out->push_back(
            storage->Rows(side, layer, CellId(run.first), run.count));
      }
    }
  }
}

void ScatterChunk(std::span<const PageId> pages, uint32_t page_size,
                  uint64_t t0, uint64_t t, const std::byte* payload,
                  KvStorage* storage) {
  ChunkTargets targets;
  CellTargets(pages, page_size, t0, t, storage, &targets);
  for (std::span<std::byte> target : targets) {
    std::memcpy(target.data(), payload, target.size());
    payload += target.size();
  }
}

bool FitsInTargetPages(const KvCache& cache, SeqId target, uint64_t num_cells,
                       bool need_run) {
  const PagePool& pool = cache.pool();
  std::vector<bool> usable(pool.num_pages());
  for (uint32_t p = 0; p < pool.num_pages(); ++p) {
    usable[p] = pool.IsFree(PageId(p));
  }
  if (cache.table().Contains(target)) {
    // A page shared with another sequence stays in use after the target goes.
    for (PageId page : cache.table().Pages(target)) {
      if (pool.RefCount(page) == 1) usable[page.value()] = true;
    }
  }
  const uint64_t needed = PagesForCells(num_cells, pool.page_size());
  uint64_t total = 0;
  uint64_t run = 0;
  uint64_t longest = 0;
  for (bool u : usable) {
    total += u ? 1 : 0;
    run = u ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return (need_run ? longest : total) >= needed;
}

}  // namespace kvault::state_internal
