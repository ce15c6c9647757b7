#include "bench/scenarios/state_io.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/env.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"

namespace kvault::bench {
namespace {

constexpr SeqId kSourceSeq{1};  // the saved sequence
constexpr SeqId kTargetSeq{2};  // restored into
constexpr SeqId kOtherSeq{3};   // owns the pages between the holes
constexpr SeqId kHoleSeq{4};    // allocated, then dropped to leave holes
constexpr ModelFingerprint kFingerprint{0x5354415445494f31ULL,
                                        0x6b7661756c74ULL};
constexpr char kFileName[] = "state-io.kvstate";

Status Validate(const StateIoOptions& o) {
  KV_RETURN_IF_ERROR(o.layout.Validate().WithContext("state-io"));
  if (o.num_tokens == 0 || o.num_tokens > kStateMaxTokens) {
    return InvalidArgumentError("state-io: --tokens must be in [1, " +
                                std::to_string(kStateMaxTokens) + "], got " +
                                std::to_string(o.num_tokens));
  }
  if (o.reps == 0) return InvalidArgumentError("state-io: --reps must be >= 1");
  // The fragmented pool has twice the sequence's pages; page ids are u32.
  if (o.page_size == 0 ||
      2 * ((o.num_tokens + o.page_size - 1) / o.page_size) > UINT32_MAX) {
    return InvalidArgumentError("state-io: " + std::to_string(o.num_tokens) +
                                " tokens need too many pages of " +
                                std::to_string(o.page_size));
  }
  return Status::Ok();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One measured operation: setup() runs untimed before each timed run().
struct Timed {
  std::function<Status()> setup = [] { return Status::Ok(); };
  std::function<Status()> run;
};

// Runs every operation once per round, reps + 1 rounds; the first round
// (page faults, cold caches) is dropped. Interleaving the operations makes a
// load change on a shared machine affect all of them alike, so their ratios
// stay meaningful. Returns the median seconds of each operation.
StatusOr<std::vector<double>> MedianSeconds(uint32_t reps,
                                            const std::vector<Timed>& ops) {
  std::vector<std::vector<double>> seconds(ops.size());
  for (uint32_t round = 0; round <= reps; ++round) {
    for (size_t i = 0; i < ops.size(); ++i) {
      KV_RETURN_IF_ERROR(ops[i].setup());
      auto start = std::chrono::steady_clock::now();
      KV_RETURN_IF_ERROR(ops[i].run());
      std::chrono::duration<double> d =
          std::chrono::steady_clock::now() - start;
      if (round > 0) seconds[i].push_back(d.count());
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& s : seconds) medians.push_back(Median(s));
  return medians;
}

double Gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

// Keeps the compiler from dropping stores to `p` it believes nobody reads.
void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// The directory the file goes to; removes what the run created.
class ScratchDir {
 public:
  static StatusOr<ScratchDir> Open(Env* env, const std::string& dir) {
    if (!dir.empty()) {
      KV_RETURN_IF_ERROR(env->CreateDir(dir));
      return ScratchDir(dir, /*owned=*/false);
    }
    char templ[] = "/tmp/kvault-state-io-XXXXXX";
    if (::mkdtemp(templ) == nullptr) return ErrnoError("mkdtemp", templ, errno);
    return ScratchDir(templ, /*owned=*/true);
  }
  ScratchDir(ScratchDir&& other) noexcept
      : dir_(std::exchange(other.dir_, {})),
        owned_(std::exchange(other.owned_, false)) {}
  ~ScratchDir() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove(JoinPath(dir_, kFileName), ec);
    if (owned_) std::filesystem::remove_all(dir_, ec);
  }
  // Returns the state file's path.
  std::string file() const { return JoinPath(dir_, kFileName); }

 private:
  ScratchDir(std::string dir, bool owned)
      : dir_(std::move(dir)), owned_(owned) {}
  std::string dir_;
  bool owned_;
};

uint64_t PagesFor(const StateIoOptions& o) {
  return (o.num_tokens + o.page_size - 1) / o.page_size;
}

StatusOr<std::unique_ptr<KvCache>> MakeCache(const StateIoOptions& o,
                                             uint64_t num_pages,
                                             KvPolicy policy) {
  KvCacheOptions options;
  options.num_pages = static_cast<uint32_t>(num_pages);
  options.page_size = o.page_size;
  options.policy = policy;
  options.layout = o.layout;
  return KvCache::Create(options);
}

Status AppendTokens(KvCache* cache, SeqId seq, uint64_t num_tokens) {
  uint64_t first = cache->table().Length(seq);
  std::vector<TokenPos> tokens(num_tokens);
  for (uint64_t i = 0; i < num_tokens; ++i) {
    tokens[i] = TokenPos{static_cast<TokenId>((first + i) % 32000),
                         static_cast<Pos>(first + i)};
  }
  return cache->Append(seq, tokens).status();
}

// Fills every K and V row of the pool with pseudo-random bytes (splitmix64).
void FillRandom(KvStorage* storage, uint64_t seed) {
  uint64_t x = seed;
  auto fill = [&x](std::span<std::byte> bytes) {
    for (size_t i = 0; i < bytes.size(); i += 8) {
      uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      std::memcpy(bytes.data() + i, &z, std::min<size_t>(8, bytes.size() - i));
    }
  };
  CellId first{0};
  for (uint32_t l = 0; l < storage->layout().num_layers; ++l) {
    fill(storage->Rows(KvSide::kK, l, first, storage->num_cells()));
    fill(storage->Rows(KvSide::kV, l, first, storage->num_cells()));
  }
}

// The cache holding the sequence that is saved: num_tokens random cells.
StatusOr<std::unique_ptr<KvCache>> MakeSource(const StateIoOptions& o) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      MakeCache(o, PagesFor(o), KvPolicy::kContiguous));
  KV_RETURN_IF_ERROR(AppendTokens(cache.get(), kSourceSeq, o.num_tokens));
  FillRandom(cache->storage(), o.seed);
  return cache;
}

// A pool whose only free pages are PagesFor(o) single-page holes, each
// between two pages of kOtherSeq.
StatusOr<std::unique_ptr<KvCache>> MakeFragmentedPool(const StateIoOptions& o) {
  uint64_t pages = PagesFor(o);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      MakeCache(o, 2 * pages, KvPolicy::kPaged));
  for (uint64_t i = 0; i < pages; ++i) {
    KV_RETURN_IF_ERROR(AppendTokens(cache.get(), kHoleSeq, o.page_size));
    KV_RETURN_IF_ERROR(AppendTokens(cache.get(), kOtherSeq, o.page_size));
  }
  cache->RemoveSequence(kHoleSeq);
  if (cache->pool().LargestFreeRun() != 1) {
    return InternalError("state-io: fragmented pool has a free run of " +
                         std::to_string(cache->pool().LargestFreeRun()) +
                         " pages, expected single-page holes");
  }
  return cache;
}

// Checks that kTargetSeq of `pool` holds exactly the source's tokens and rows.
Status CheckRestored(const KvCache& source, const KvCache& pool) {
  const SequenceTable& src = source.table();
  const SequenceTable& dst = pool.table();
  if (!std::ranges::equal(src.Cells(kSourceSeq), dst.Cells(kTargetSeq))) {
    return InternalError(
        "state-io: restored tokens differ from the saved ones");
  }
  const KvStorage& a = *source.storage();
  const KvStorage& b = *pool.storage();
  for (uint64_t i = 0; i < src.Length(kSourceSeq); ++i) {
    CellId ca = src.CellAt(kSourceSeq, i), cb = dst.CellAt(kTargetSeq, i);
    for (uint32_t l = 0; l < a.layout().num_layers; ++l) {
      if (!std::ranges::equal(a.Rows(KvSide::kK, l, ca),
                              b.Rows(KvSide::kK, l, cb)) ||
          !std::ranges::equal(a.Rows(KvSide::kV, l, ca),
                              b.Rows(KvSide::kV, l, cb))) {
        return InternalError("state-io: restored cell " + std::to_string(i) +
                             " layer " + std::to_string(l) + " differs");
      }
    }
  }
  return Status::Ok();
}

// Restores `path` into kTargetSeq of `pool`, emptied first (untimed).
Timed RestoreOp(const std::string& path, uint32_t num_threads, KvCache* pool) {
  Timed op;
  op.setup = [pool] {
    pool->RemoveSequence(kTargetSeq);
    return Status::Ok();
  };
  op.run = [path, num_threads, pool] {
    RestoreOptions options;
    options.num_threads = num_threads;
    return RestoreSequenceFromFile(Env::Default(), path, kFingerprint,
                                   kTargetSeq, pool, options)
        .status();
  };
  return op;
}

// Saves the source sequence to `path`, with or without the fsyncs.
Timed SaveOp(const std::string& path, const KvCache& source, bool sync) {
  SaveOptions save;
  save.sync = sync;
  Timed op;
  op.run = [path, &source, save] {
    return SaveSequenceToFile(Env::Default(), source, kSourceSeq, kFingerprint,
                              path, save)
        .status();
  };
  return op;
}

// pread()s a whole (cached) file into a touched buffer of its size: the
// bandwidth a restore could reach at best.
class PreadBench {
 public:
  static StatusOr<std::unique_ptr<PreadBench>> Open(const std::string& path,
                                                    uint64_t bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open", path, errno);
    return std::unique_ptr<PreadBench>(new PreadBench(path, fd, bytes));
  }
  ~PreadBench() { ::close(fd_); }

  // Reads the whole file once.
  Status Run() {
    for (uint64_t done = 0; done < bytes_;) {
      ssize_t n = ::pread(fd_, buffer_.get() + done, bytes_ - done,
                          static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("pread", path_, errno);
      if (n == 0) return CorruptionError("state-io: " + path_ + " shrank");
      done += static_cast<uint64_t>(n);
    }
    Escape(buffer_.get());
    return Status::Ok();
  }

 private:
  PreadBench(std::string path, int fd, uint64_t bytes)
      : path_(std::move(path)),
        fd_(fd),
        bytes_(bytes),
        buffer_(new std::byte[bytes]) {
    std::memset(buffer_.get(), 1, bytes_);
  }
  std::string path_;
  int fd_;
  uint64_t bytes_;
  std::unique_ptr<std::byte[]> buffer_;  // [bytes]
};

// memcpy of `bytes` between two buffers touched beforehand.
class MemcpyBench {
 public:
  explicit MemcpyBench(uint64_t bytes)
      : bytes_(bytes), src_(new std::byte[bytes]), dst_(new std::byte[bytes]) {
    std::memset(src_.get(), 2, bytes_);
    std::memset(dst_.get(), 3, bytes_);
  }
  // Copies once.
  Status Run() {
    std::memcpy(dst_.get(), src_.get(), bytes_);
    Escape(dst_.get());
    return Status::Ok();
  }

 private:
  uint64_t bytes_;
  std::unique_ptr<std::byte[]> src_;  // [bytes]
  std::unique_ptr<std::byte[]> dst_;  // [bytes]
};

// Saves without and with fsync (interleaved, the fsync'ed one last, so the
// file is clean and cached afterwards); fills bytes and the save figures.
Status MeasureSaves(const StateIoOptions& o, const std::string& path,
                    const KvCache& source, StateIoResult* r) {
  KV_ASSIGN_OR_RETURN(std::vector<double> s,
                      MedianSeconds(o.reps, {SaveOp(path, source, false),
                                             SaveOp(path, source, true)}));
  KV_ASSIGN_OR_RETURN(r->bytes, Env::Default()->GetFileSize(path));
  r->save_gbps = Gbps(r->bytes, s[0]);
  r->save_fsync_gbps = Gbps(r->bytes, s[1]);
  return Status::Ok();
}

// Restores into a contiguous pool (unless fragmented_only) and a fragmented
// one, interleaved with the raw pread and memcpy of the same byte count;
// then checks that each pool holds the saved sequence.
Status MeasureRestores(const StateIoOptions& o, const std::string& path,
                       const KvCache& source, StateIoResult* r) {
  std::unique_ptr<KvCache> contiguous;
  if (!o.fragmented_only) {
    KV_ASSIGN_OR_RETURN(contiguous,
                        MakeCache(o, PagesFor(o), KvPolicy::kContiguous));
  }
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> fragmented,
                      MakeFragmentedPool(o));
  KV_ASSIGN_OR_RETURN(std::unique_ptr<PreadBench> read,
                      PreadBench::Open(path, r->bytes));
  MemcpyBench copy(r->bytes);
  std::vector<Timed> ops = {
      RestoreOp(path, o.restore_threads, fragmented.get()),
      {.run = [&] { return read->Run(); }},
      {.run = [&] { return copy.Run(); }}};
  if (contiguous)
    ops.push_back(RestoreOp(path, o.restore_threads, contiguous.get()));
  KV_ASSIGN_OR_RETURN(std::vector<double> s, MedianSeconds(o.reps, ops));
  r->restore_fragmented_gbps = Gbps(r->bytes, s[0]);
  r->read_gbps = Gbps(r->bytes, s[1]);
  r->memcpy_gbps = Gbps(r->bytes, s[2]);
  KV_RETURN_IF_ERROR(CheckRestored(source, *fragmented));
  if (contiguous) {
    r->restore_gbps = Gbps(r->bytes, s[3]);
    KV_RETURN_IF_ERROR(CheckRestored(source, *contiguous));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StateIoResult> RunStateIo(const StateIoOptions& o) {
  KV_RETURN_IF_ERROR(Validate(o));
  Env* env = Env::Default();
  KV_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Open(env, o.dir));
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> source, MakeSource(o));
  StateIoResult r;
  r.num_tokens = o.num_tokens;
  r.layout = o.layout.ToString();
  r.page_size = o.page_size;
  r.restore_threads = o.restore_threads;
  r.reps = o.reps;
  KV_RETURN_IF_ERROR(MeasureSaves(o, dir.file(), *source, &r));
  KV_RETURN_IF_ERROR(MeasureRestores(o, dir.file(), *source, &r));
  return r;
}

std::string StateIoJson(const StateIoResult& r) {
  // ordered_json keeps the keys in the documented order.
  nlohmann::ordered_json j;
  j["bytes"] = r.bytes;
  j["restore_threads"] = r.restore_threads;
  j["save_gbps"] = r.save_gbps;
  j["save_fsync_gbps"] = r.save_fsync_gbps;
  j["restore_gbps"] = r.restore_gbps ? nlohmann::ordered_json(*r.restore_gbps)
                                     : nlohmann::ordered_json(nullptr);
  j["restore_fragmented_gbps"] = r.restore_fragmented_gbps;
  j["read_gbps"] = r.read_gbps;
  j["memcpy_gbps"] = r.memcpy_gbps;
  return j.dump();
}

}  // namespace kvault::bench
