// RestoreJob and the split save: the three restore phases into a fragmented
// pool, Load on another thread while the owner keeps using the cache, abort
// and failure paths that must leave the cache byte-identical, concurrent
// jobs, and WriteSnapshotToFile against SaveSequenceToFile.
#include "kv/restore_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/fault_injecting_env.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::CacheSnapshot;
using state_test::DiffSnapshots;
using state_test::kTestFingerprint;
using state_test::MakeCache;
using state_test::SaveToString;
using state_test::SequenceBytes;
using state_test::SmallLayout;
using state_test::SnapshotWithout;
using state_test::StringFile;
using state_test::TakeSnapshot;

constexpr SeqId kScratchA{0xFFFFFF00u};
constexpr SeqId kScratchB{0xFFFFFF01u};

// Saves `tokens_per_chunk` tokens per chunk.
SaveOptions ChunkOf(uint64_t tokens_per_chunk) {
  SaveOptions options;
  options.target_chunk_bytes = tokens_per_chunk * SmallLayout().cell_bytes();
  return options;
}

std::vector<TokenPos> CellsOf(const KvCache& cache, SeqId seq) {
  std::span<const TokenPos> cells = cache.table().Cells(seq);
  return {cells.begin(), cells.end()};
}

StatusOr<std::unique_ptr<RestoreJob>> Prepare(
    std::unique_ptr<RandomAccessFile> file, KvCache* cache, SeqId target,
    SeqId scratch, const RestoreOptions& options = {}) {
  return RestoreJob::Prepare(std::move(file), kTestFingerprint, cache, target,
                             scratch, options);
}

// A file whose chunk reads wait at gates: a read at a gate's offset (a
// chunk's start; gates in file order) blocks until the gate's latch opens.
// Lets a test pin down that the owner thread runs while Load is in the
// middle of a file, without sleeps.
class GatedFile final : public RandomAccessFile {
 public:
  struct Gate {
    uint64_t offset;
    std::latch* open;
  };
  GatedFile(std::string bytes, std::vector<Gate> gates)
      : file_(StringFile(std::move(bytes))), gates_(std::move(gates)) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    if (next_ < gates_.size() && offset == gates_[next_].offset) {
      gates_[next_++].open->wait();  // only the Load thread reads chunks
    }
    return file_->ReadAt(offset, out);
  }
  uint64_t size() const override { return file_->size(); }

 private:
  std::unique_ptr<RandomAccessFile> file_;
  std::vector<Gate> gates_;
  mutable size_t next_ = 0;
};

class RestoreJobPhasesTest : public ::testing::TestWithParam<uint32_t> {};

// Prepare reserves, Load fills only the reserved cells, Commit swaps them
// in; nothing else in a fragmented pool changes at any phase.
TEST_P(RestoreJobPhasesTest, RoundTripIntoFragmentedPool) {
  const uint32_t page_size = GetParam();
  const uint32_t num_pages = 512 / page_size;
  auto cache = MakeCache(SmallLayout(), num_pages, page_size);
  AppendRandom(cache.get(), SeqId(1), 2 * page_size, 5);  // the old target
  state_test::FragmentPool(cache.get(), 100, 3);
  ASSERT_EQ(cache->pool().LargestFreeRun(), 1u);
  auto source = MakeCache(SmallLayout(), num_pages, page_size);
  const uint64_t num_tokens = cache->pool().num_free_pages() * page_size - 3;
  AppendRandom(source.get(), SeqId(7), num_tokens, 11);
  source->ShiftPositions(SeqId(7), 20, 1 << 30, 500);
  const std::string file = SaveToString(*source, SeqId(7), ChunkOf(5));
  const CacheSnapshot before = TakeSnapshot(*cache);

  auto job = Prepare(StringFile(file), cache.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->num_tokens(), num_tokens);
  EXPECT_EQ((*job)->target(), SeqId(1));
  EXPECT_EQ((*job)->scratch(), kScratchA);
  EXPECT_EQ(CellsOf(*cache, kScratchA), CellsOf(*source, SeqId(7)));
  EXPECT_EQ(DiffSnapshots(before, SnapshotWithout(TakeSnapshot(*cache),
                                                  kScratchA, page_size)),
            "");
  ASSERT_TRUE((*job)->Load().ok());
  EXPECT_EQ(SequenceBytes(*cache, kScratchA), SequenceBytes(*source, SeqId(7)));
  EXPECT_EQ(DiffSnapshots(before, SnapshotWithout(TakeSnapshot(*cache),
                                                  kScratchA, page_size)),
            "");
  StatusOr<RestoreResult> r = (*job)->Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*job)->finished());
  EXPECT_EQ(r->num_tokens, num_tokens);
  EXPECT_EQ(r->bytes_read, file.size());
  EXPECT_GE(r->elapsed_ms, 0.0);
  EXPECT_FALSE(cache->table().Contains(kScratchA));
  EXPECT_EQ(CellsOf(*cache, SeqId(1)), CellsOf(*source, SeqId(7)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(1)), SequenceBytes(*source, SeqId(7)));
  EXPECT_EQ(
      DiffSnapshots(SnapshotWithout(before, SeqId(1), page_size),
                    SnapshotWithout(TakeSnapshot(*cache), SeqId(1), page_size)),
      "");
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
  // Finished: a second Commit is refused, Abort and Load change nothing.
  const CacheSnapshot after = TakeSnapshot(*cache);
  EXPECT_EQ((*job)->Commit().status().code(), StatusCode::kFailedPrecondition);
  (*job)->Abort();
  EXPECT_EQ((*job)->Load().code(), StatusCode::kCancelled);
  EXPECT_EQ(DiffSnapshots(after, TakeSnapshot(*cache)), "");
}

INSTANTIATE_TEST_SUITE_P(PageSizes, RestoreJobPhasesTest,
                         ::testing::Values(1u, 16u));

// The owner appends to and reads other sequences (creating and removing
// some, which reshapes the table) while Load runs on another thread. Gates
// hold Load at its first chunk and again mid-file until the owner has done
// work, so the two provably overlap. A Load that read the table, or wrote
// outside its cells, would show up as wrong bytes here.
TEST(RestoreJobTest, LoadOnAnotherThreadWhileOwnerUsesTheCache) {
  constexpr uint32_t kPageSize = 4;
  auto cache = MakeCache(SmallLayout(), 512, kPageSize);
  auto source = MakeCache(SmallLayout(), 512, kPageSize);
  AppendRandom(source.get(), SeqId(1), 1000, 21);
  const std::string bytes = SaveToString(*source, SeqId(1), ChunkOf(1));
  AppendRandom(cache.get(), SeqId(2), 10, 22);  // grows while Load runs
  AppendRandom(cache.get(), SeqId(1), 9, 23);   // the old target

  StatusOr<StateHeader> h = ReadStateHeader(*StringFile(bytes));
  ASSERT_TRUE(h.ok());
  std::latch first_gate(1), middle_gate(1);
  auto file = std::make_unique<GatedFile>(
      bytes, std::vector<GatedFile::Gate>{
                 {h->chunk_offset(0), &first_gate},
                 {h->chunk_offset(h->num_chunks() / 2), &middle_gate}});
  auto job = Prepare(std::move(file), cache.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();

  std::atomic<bool> load_done{false};
  Status load_status;
  std::thread io([&] {
    load_status = (*job)->Load();
    load_done.store(true);
  });
  std::string expected_two = SequenceBytes(*cache, SeqId(2));
  std::map<uint32_t, std::string> fillers;  // live filler -> its bytes
  for (uint32_t i = 0; i < 40 || !load_done.load(); ++i) {
    if (cache->table().Length(SeqId(2)) < 200) {
      AppendRandom(cache.get(), SeqId(2), 1, 1000 + i);
      const CellId cell =
          cache->table().CellAt(SeqId(2), cache->table().Length(SeqId(2)) - 1);
      expected_two += state_test::CellBytes(*cache->storage(), cell);
    }
    const uint32_t id = 100 + i % 64;
    cache->RemoveSequence(SeqId(id));  // frees pages Load must not care about
    AppendRandom(cache.get(), SeqId(id), 3, 5000 + i);
    fillers[id] = SequenceBytes(*cache, SeqId(id));
    ASSERT_EQ(SequenceBytes(*cache, SeqId(2)), expected_two) << "round " << i;
    if (i == 0) first_gate.count_down();
    if (i == 20) middle_gate.count_down();
  }
  io.join();
  ASSERT_TRUE(load_status.ok()) << load_status;
  StatusOr<RestoreResult> r = (*job)->Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SequenceBytes(*cache, SeqId(1)), SequenceBytes(*source, SeqId(1)));
  EXPECT_EQ(CellsOf(*cache, SeqId(1)), CellsOf(*source, SeqId(1)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(2)), expected_two);
  for (const auto& [id, filler] : fillers) {
    EXPECT_EQ(SequenceBytes(*cache, SeqId(id)), filler) << "seq#" << id;
  }
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
}

class RestoreJobFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto source = MakeCache(SmallLayout(), 128, 4);
    AppendRandom(source.get(), SeqId(1), 100, 1);
    file_ = SaveToString(*source, SeqId(1), ChunkOf(10));  // 10 chunks
    cache_ = MakeCache(SmallLayout(), 128, 4);
    AppendRandom(cache_.get(), SeqId(1), 30, 11);  // the target
    AppendRandom(cache_.get(), SeqId(4), 50, 12);  // a bystander
    before_ = TakeSnapshot(*cache_);
  }
  void ExpectUnchanged() {
    EXPECT_EQ(DiffSnapshots(before_, TakeSnapshot(*cache_)), "");
    EXPECT_FALSE(cache_->table().Contains(kScratchA));
  }

  std::string file_;
  std::unique_ptr<KvCache> cache_;
  CacheSnapshot before_;
};

TEST_F(RestoreJobFailureTest, AbortAfterPrepareLeavesTheCacheAsItWas) {
  auto job = Prepare(StringFile(file_), cache_.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(cache_->table().Contains(kScratchA));
  (*job)->Abort();
  EXPECT_TRUE((*job)->finished());
  ExpectUnchanged();
  // A Load queued before the abort finds the job cancelled and writes
  // nothing (its cells may belong to someone else by now).
  AppendRandom(cache_.get(), SeqId(5), 100, 13);
  const std::string five = SequenceBytes(*cache_, SeqId(5));
  EXPECT_EQ((*job)->Load().code(), StatusCode::kCancelled);
  EXPECT_EQ(SequenceBytes(*cache_, SeqId(5)), five);
}

TEST_F(RestoreJobFailureTest, CorruptChunkFailsLoadAndCommitIsRefused) {
  StatusOr<StateHeader> h = ReadStateHeader(*StringFile(file_));
  ASSERT_TRUE(h.ok());
  std::string bad = file_;
  bad[h->chunk_offset(5) + 77] ^= 0x10;
  auto job = Prepare(StringFile(bad), cache_.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();  // chunks are Load's business
  Status loaded = (*job)->Load();
  EXPECT_TRUE(loaded.IsCorruption()) << loaded;
  EXPECT_EQ(loaded.reason(), kReasonChecksumMismatch) << loaded;
  EXPECT_NE(loaded.message().find("chunk 5 of 10"), std::string::npos)
      << loaded;
  EXPECT_EQ((*job)->Load().code(), StatusCode::kFailedPrecondition);
  StatusOr<RestoreResult> committed = (*job)->Commit();
  EXPECT_EQ(committed.status().code(), StatusCode::kFailedPrecondition)
      << committed.status();
  EXPECT_TRUE((*job)->finished());
  ExpectUnchanged();
}

TEST_F(RestoreJobFailureTest, FailedReadThenAbortLeavesTheCacheAsItWas) {
  FaultInjectingEnv env;
  ASSERT_TRUE(WriteStringToFile(&env, file_, "/slot", false).ok());
  auto opened = env.NewRandomAccessFile("/slot");
  ASSERT_TRUE(opened.ok());
  auto job =
      Prepare(std::move(opened).value(), cache_.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  env.FailNthRead(4, {.kind = FaultKind::kIOError});  // chunk 3
  Status loaded = (*job)->Load();
  EXPECT_TRUE(loaded.IsIOError()) << loaded;
  EXPECT_NE(loaded.message().find("chunk 3 of 10"), std::string::npos)
      << loaded;
  (*job)->Abort();
  ExpectUnchanged();
}

TEST_F(RestoreJobFailureTest, PrepareErrorsReserveNothing) {
  auto code_of = [&](SeqId target, SeqId scratch, const RestoreOptions& o = {},
                     std::string bytes = "") {
    auto job = Prepare(StringFile(bytes.empty() ? file_ : bytes), cache_.get(),
                       target, scratch, o);
    EXPECT_FALSE(job.ok());
    ExpectUnchanged();
    return job.ok() ? StatusCode::kOk : job.status().code();
  };
  EXPECT_EQ(code_of(kScratchB, kScratchA), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(SeqId(1), SeqId(77)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(SeqId(1), kScratchA, {}, file_.substr(0, 500)),
            StatusCode::kCorruption);
  EXPECT_EQ(Prepare(nullptr, cache_.get(), SeqId(1), kScratchA).status().code(),
            StatusCode::kInvalidArgument);
  auto other_model = RestoreJob::Prepare(StringFile(file_), ModelFingerprint{},
                                         cache_.get(), SeqId(1), kScratchA);
  EXPECT_EQ(other_model.status().reason(), kReasonModelMismatch);
  ExpectUnchanged();

  // No room: make_room is asked once for the file's tokens.
  auto small = MakeCache(SmallLayout(), 20, 4);
  int asked = 0;
  RestoreOptions o;
  o.make_room = [&](uint64_t num_tokens) {
    ++asked;
    EXPECT_EQ(num_tokens, 100u);
    return Status::Ok();
  };
  auto job = Prepare(StringFile(file_), small.get(), SeqId(1), kScratchA, o);
  EXPECT_TRUE(job.status().IsResourceExhausted()) << job.status();
  EXPECT_NE(job.status().message().find(
                "restore into seq#1: restore needs 100 cells (25 pages of 4), "
                "the pool has 20 of 20 pages free after make_room"),
            std::string::npos)
      << job.status();
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(small->table().SequenceIds().empty());
}

// The owner broke the contract (freed the scratch cells): Commit notices,
// refuses, and the target keeps its old contents.
TEST_F(RestoreJobFailureTest, CommitRefusesWhenScratchCellsWereFreed) {
  auto job = Prepare(StringFile(file_), cache_.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->Load().ok());
  cache_->RemoveSequence(kScratchA);
  StatusOr<RestoreResult> committed = (*job)->Commit();
  EXPECT_EQ(committed.status().code(), StatusCode::kInternal)
      << committed.status();
  ExpectUnchanged();
}

// Two jobs in flight at once, each under its own scratch id, loaded on two
// threads together; RestoreSequence (kRestoreScratchSeq) still works
// meanwhile, and a scratch id cannot serve two jobs.
TEST(RestoreJobTest, TwoConcurrentJobsWithDifferentScratchIds) {
  auto source = MakeCache(SmallLayout(), 256, 8);
  AppendRandom(source.get(), SeqId(1), 300, 31);
  AppendRandom(source.get(), SeqId(2), 250, 32);
  const std::string a = SaveToString(*source, SeqId(1), ChunkOf(3));
  const std::string b = SaveToString(*source, SeqId(2), ChunkOf(4));
  auto cache = MakeCache(SmallLayout(), 256, 8);
  AppendRandom(cache.get(), SeqId(11), 40, 33);
  auto job_a = Prepare(StringFile(a), cache.get(), SeqId(10), kScratchA);
  ASSERT_TRUE(job_a.ok()) << job_a.status();
  auto job_b = Prepare(StringFile(b), cache.get(), SeqId(11), kScratchB);
  ASSERT_TRUE(job_b.ok()) << job_b.status();
  auto twice = Prepare(StringFile(b), cache.get(), SeqId(12), kScratchB);
  EXPECT_EQ(twice.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.status().message().find("seq#4294967041 exists"),
            std::string::npos)
      << twice.status();
  ASSERT_TRUE(
      RestoreSequence(*StringFile(a), kTestFingerprint, SeqId(12), cache.get())
          .ok());

  Status status_a, status_b;
  std::thread thread_a([&] { status_a = (*job_a)->Load(); });
  std::thread thread_b([&] { status_b = (*job_b)->Load(); });
  thread_a.join();
  thread_b.join();
  ASSERT_TRUE(status_a.ok()) << status_a;
  ASSERT_TRUE(status_b.ok()) << status_b;
  ASSERT_TRUE((*job_b)->Commit().ok());
  ASSERT_TRUE((*job_a)->Commit().ok());
  EXPECT_EQ(SequenceBytes(*cache, SeqId(10)), SequenceBytes(*source, SeqId(1)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(11)), SequenceBytes(*source, SeqId(2)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(12)), SequenceBytes(*source, SeqId(1)));
  EXPECT_EQ(cache->table().SequenceIds(),
            (std::vector<SeqId>{SeqId(10), SeqId(11), SeqId(12)}));
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
}

// Under contiguous+defrag, a reservation that needs a defragmentation is
// refused while another restore is in flight (it would move that job's
// cells), and works once that job is done.
TEST(RestoreJobTest, NoDefragmentingReservationWhileAnotherJobIsInFlight) {
  constexpr uint32_t kPageSize = 4;
  auto cache =
      MakeCache(SmallLayout(), 32, kPageSize, KvPolicy::kContiguousDefrag);
  state_test::FragmentPool(cache.get(), 100, 41);
  ASSERT_EQ(cache->pool().LargestFreeRun(), 1u);
  auto source = MakeCache(SmallLayout(), 32, kPageSize);
  AppendRandom(source.get(), SeqId(1), kPageSize, 42);
  AppendRandom(source.get(), SeqId(2), 2 * kPageSize, 43);
  const std::string one_page = SaveToString(*source, SeqId(1));
  const std::string two_pages = SaveToString(*source, SeqId(2));

  auto job_a = Prepare(StringFile(one_page), cache.get(), SeqId(1), kScratchA);
  ASSERT_TRUE(job_a.ok()) << job_a.status();
  const std::vector<PageId> pages_a(cache->table().Pages(kScratchA).begin(),
                                    cache->table().Pages(kScratchA).end());
  auto job_b = Prepare(StringFile(two_pages), cache.get(), SeqId(2), kScratchB);
  EXPECT_TRUE(job_b.status().IsResourceExhausted()) << job_b.status();
  EXPECT_NE(job_b.status().message().find("restore in flight"),
            std::string::npos)
      << job_b.status();
  EXPECT_EQ(cache->counters().defrag_runs, 0u);
  ASSERT_TRUE((*job_a)->Load().ok());
  EXPECT_TRUE(std::equal(pages_a.begin(), pages_a.end(),
                         cache->table().Pages(kScratchA).begin(),
                         cache->table().Pages(kScratchA).end()));
  ASSERT_TRUE((*job_a)->Commit().ok());
  job_b = Prepare(StringFile(two_pages), cache.get(), SeqId(2), kScratchB);
  ASSERT_TRUE(job_b.ok()) << job_b.status();
  EXPECT_EQ(cache->counters().defrag_runs, 1u);
  ASSERT_TRUE((*job_b)->Load().ok());
  ASSERT_TRUE((*job_b)->Commit().ok());
  EXPECT_EQ(SequenceBytes(*cache, SeqId(1)), SequenceBytes(*source, SeqId(1)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(2)), SequenceBytes(*source, SeqId(2)));
}

// --- The split save -----------------------------------------------------

// The write runs on another thread while the owner appends to and reads
// other sequences; the file equals what SaveSequenceToFile writes.
TEST(SaveSnapshotTest, WriteOnAnotherThreadEqualsSaveSequenceToFile) {
  FaultInjectingEnv env;
  auto cache = MakeCache(SmallLayout(KvDtype::kQ8_0), 256, 4);
  for (int r = 0; r < 20; ++r) {  // interleaved pages
    AppendRandom(cache.get(), SeqId(1), 10, 50 + r);
    AppendRandom(cache.get(), SeqId(2), 3, 80 + r);
  }
  const SaveOptions options = ChunkOf(7);
  auto saved = SaveSequenceToFile(&env, *cache, SeqId(1), kTestFingerprint,
                                  "/sync", options);
  ASSERT_TRUE(saved.ok()) << saved.status();
  StatusOr<SaveSnapshot> snap =
      TakeSaveSnapshot(*cache, SeqId(1), kTestFingerprint);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->tokens.size(), 200u);
  EXPECT_EQ(snap->seq, SeqId(1));

  std::atomic<bool> done{false};
  StatusOr<SaveResult> written = InternalError("not run");
  std::thread io([&] {
    written =
        WriteSnapshotToFile(&env, *cache->storage(), *snap, "/async", options);
    done.store(true);
  });
  std::string expected_two = SequenceBytes(*cache, SeqId(2));
  for (uint32_t i = 0; (i < 20 || !done.load()) && i < 400; ++i) {
    AppendRandom(cache.get(), SeqId(2), 1, 300 + i);
    expected_two += state_test::CellBytes(
        *cache->storage(),
        cache->table().CellAt(SeqId(2), cache->table().Length(SeqId(2)) - 1));
    ASSERT_EQ(SequenceBytes(*cache, SeqId(2)), expected_two);
  }
  io.join();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->num_tokens, 200u);
  EXPECT_EQ(written->bytes_written, saved->bytes_written);
  StatusOr<std::string> sync_bytes = ReadFileToString(&env, "/sync");
  StatusOr<std::string> async_bytes = ReadFileToString(&env, "/async");
  ASSERT_TRUE(sync_bytes.ok() && async_bytes.ok());
  EXPECT_TRUE(*async_bytes == *sync_bytes);
  EXPECT_TRUE(*async_bytes == SaveToString(*cache, SeqId(1), options));
}

TEST(SaveSnapshotTest, BadSnapshotsAndUnknownSequencesAreRefused) {
  FaultInjectingEnv env;
  auto cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(cache.get(), SeqId(1), 10, 1);
  EXPECT_TRUE(TakeSaveSnapshot(*cache, SeqId(9), kTestFingerprint)
                  .status()
                  .IsNotFound());
  KvCacheOptions bookkeeping;
  bookkeeping.num_pages = 4;
  auto bare = KvCache::Create(bookkeeping);
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE((*bare)->Append(SeqId(1), {}).ok());
  EXPECT_EQ(
      TakeSaveSnapshot(**bare, SeqId(1), kTestFingerprint).status().code(),
      StatusCode::kFailedPrecondition);

  StatusOr<SaveSnapshot> good =
      TakeSaveSnapshot(*cache, SeqId(1), kTestFingerprint);
  ASSERT_TRUE(good.ok());
  std::vector<SaveSnapshot> bad(4, *good);
  bad[0].pages.back() = PageId(16);  // beyond the pool
  bad[1].pages.pop_back();           // too few pages for the tokens
  bad[2].layout = SmallLayout(KvDtype::kF32);
  bad[3].page_size = 0;
  for (const SaveSnapshot& snap : bad) {
    Status s =
        WriteSnapshotToFile(&env, *cache->storage(), snap, "/x").status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("save seq#1 to /x"), std::string::npos) << s;
  }
  EXPECT_TRUE(env.GetChildren("/")->empty());
}

// The full fault matrix runs on SaveSequenceToFile (state_file_fault_test),
// which is a snapshot plus this write; here a few faults on the write alone.
TEST(SaveSnapshotTest, FailingWritesKeepTheOldFileAndLeaveNoTemp) {
  FaultInjectingEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  auto cache = MakeCache(SmallLayout(), 64, 4);
  AppendRandom(cache.get(), SeqId(1), 50, 1);
  AppendRandom(cache.get(), SeqId(2), 20, 2);
  const SaveOptions options = ChunkOf(10);  // 9 appends a save
  ASSERT_TRUE(SaveSequenceToFile(&env, *cache, SeqId(2), kTestFingerprint,
                                 "/d/slot", options)
                  .ok());
  const std::string old_file = *ReadFileToString(&env, "/d/slot");
  StatusOr<SaveSnapshot> snap =
      TakeSaveSnapshot(*cache, SeqId(1), kTestFingerprint);
  ASSERT_TRUE(snap.ok());
  auto expect_failed_cleanly = [&](StatusCode code) {
    Status s =
        WriteSnapshotToFile(&env, *cache->storage(), *snap, "/d/slot", options)
            .status();
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find("save seq#1 to /d/slot"), std::string::npos)
        << s;
    EXPECT_TRUE(*ReadFileToString(&env, "/d/slot") == old_file);
    EXPECT_EQ(*env.GetChildren("/d"), std::vector<std::string>{"slot"});
  };
  for (uint64_t n : {1, 5, 9}) {
    SCOPED_TRACE("append " + std::to_string(n));
    env.FailNthWrite(n, {.kind = FaultKind::kNoSpace, .num_partial_bytes = 3});
    expect_failed_cleanly(StatusCode::kResourceExhausted);
  }
  env.FailNthSync(1, {.kind = FaultKind::kIOError});
  expect_failed_cleanly(StatusCode::kIOError);
  env.FailNthRename(1, {.kind = FaultKind::kIOError});
  expect_failed_cleanly(StatusCode::kIOError);
  env.ClearFaults();
  ASSERT_TRUE(
      WriteSnapshotToFile(&env, *cache->storage(), *snap, "/d/slot", options)
          .ok());
  EXPECT_TRUE(*ReadFileToString(&env, "/d/slot") ==
              SaveToString(*cache, SeqId(1), options));
}

}  // namespace
}  // namespace kvault
