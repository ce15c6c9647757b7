#include "kv/state_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "core/fault_injecting_env.h"
#include "kv/restore_chunks.h"
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
using state_test::StringFile;
using state_test::TakeSnapshot;

StatusOr<RestoreResult> Restore(const std::string& file, KvCache* cache,
                                SeqId target,
                                const RestoreOptions& options = {},
                                const ModelFingerprint& fp = kTestFingerprint) {
  return RestoreSequence(*StringFile(file), fp, target, cache, options);
}

std::vector<TokenPos> CellsOf(const KvCache& cache, SeqId seq) {
  std::span<const TokenPos> cells = cache.table().Cells(seq);
  return {cells.begin(), cells.end()};
}

// Saves a chunk of `tokens_per_chunk` tokens per chunk.
SaveOptions ChunkOf(const KvLayout& layout, uint64_t tokens_per_chunk) {
  SaveOptions options;
  options.target_chunk_bytes = tokens_per_chunk * layout.cell_bytes();
  return options;
}

// Builds seqs 1 and 2 interleaved (so their pages alternate), with a gap in
// seq 1's positions.
void BuildInterleaved(KvCache* cache, int rounds, uint64_t seed) {
  for (int r = 0; r < rounds; ++r) {
    AppendRandom(cache, SeqId(1), 10, seed + 2 * r);
    AppendRandom(cache, SeqId(2), 7, seed + 2 * r + 1);
  }
  cache->ShiftPositions(SeqId(1), 50, 1 << 30, 1000);
}

// Returns `after` minus `target`, for comparing with a snapshot taken before
// `target` was restored: everything else must be exactly as it was.
CacheSnapshot WithoutSequence(CacheSnapshot after, const KvCache& cache,
                              SeqId target) {
  for (PageId p : cache.table().Pages(target)) {
    after.refcounts[p.value()] -= 1;
  }
  for (uint64_t i = 0; i < cache.table().Length(target); ++i) {
    after.cell_bytes.erase(cache.table().CellAt(target, i).value());
  }
  after.pages.erase(target);
  after.cells.erase(target);
  return after;
}

class StateRoundTripTest
    : public ::testing::TestWithParam<std::tuple<KvDtype, uint32_t>> {};

TEST_P(StateRoundTripTest, RestoredBytesTokensAndPositionsEqualTheSaved) {
  const auto [dtype, page_size] = GetParam();
  const KvLayout layout = SmallLayout(dtype);
  const uint32_t num_pages = 2048 / page_size;
  auto source = MakeCache(layout, num_pages, page_size);
  BuildInterleaved(source.get(), 30, 7);
  const std::string file = SaveToString(*source, SeqId(1), ChunkOf(layout, 7));

  // Into the same cache under a new id, and into another cache.
  auto other = MakeCache(layout, num_pages, page_size);
  AppendRandom(other.get(), SeqId(4), 33, 99);
  for (KvCache* cache : {source.get(), other.get()}) {
    StatusOr<RestoreResult> r = Restore(file, cache, SeqId(9));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->num_tokens, 300u);
    EXPECT_EQ(r->bytes_read, file.size());
    EXPECT_EQ(CellsOf(*cache, SeqId(9)), CellsOf(*source, SeqId(1)));
    EXPECT_EQ(SequenceBytes(*cache, SeqId(9)),
              SequenceBytes(*source, SeqId(1)));
    EXPECT_FALSE(cache->table().Contains(kRestoreScratchSeq));
    EXPECT_TRUE(CheckInvariants(cache->table()).ok());
  }
  // A restored sequence saves to the identical file.
  EXPECT_EQ(SaveToString(*other, SeqId(9), ChunkOf(layout, 7)), file);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndPageSizes, StateRoundTripTest,
                         ::testing::Combine(::testing::Values(KvDtype::kF32,
                                                              KvDtype::kF16,
                                                              KvDtype::kQ8_0),
                                            ::testing::Values(1u, 16u, 256u)));

TEST(StateFileTest, RoundTripAcrossPageSizes) {
  auto source = MakeCache(SmallLayout(), 64, 16);
  AppendRandom(source.get(), SeqId(1), 200, 5);
  const std::string file = SaveToString(*source, SeqId(1));  // one chunk
  auto target = MakeCache(SmallLayout(), 1024, 1);
  ASSERT_TRUE(Restore(file, target.get(), SeqId(1)).ok());
  EXPECT_EQ(SequenceBytes(*target, SeqId(1)), SequenceBytes(*source, SeqId(1)));
}

class FragmentedRestoreTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(FragmentedRestoreTest, FillsSinglePageHolesAndTouchesNothingElse) {
  const uint32_t page_size = GetParam();
  const uint32_t num_pages = 512 / page_size;
  auto cache = MakeCache(SmallLayout(), num_pages, page_size);
  state_test::FragmentPool(cache.get(), 100, 3);
  ASSERT_EQ(cache->pool().num_free_pages(), num_pages / 2);
  ASSERT_EQ(cache->pool().LargestFreeRun(), 1u);

  auto source = MakeCache(SmallLayout(), num_pages, page_size);
  AppendRandom(source.get(), SeqId(1), 256, 11);  // every free cell
  const std::string file =
      SaveToString(*source, SeqId(1), ChunkOf(SmallLayout(), 5));
  const CacheSnapshot before = TakeSnapshot(*cache);
  StatusOr<RestoreResult> r = Restore(file, cache.get(), SeqId(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(cache->pool().num_free_pages(), 0u);
  EXPECT_EQ(SequenceBytes(*cache, SeqId(1)), SequenceBytes(*source, SeqId(1)));
  EXPECT_EQ(CellsOf(*cache, SeqId(1)), CellsOf(*source, SeqId(1)));
  EXPECT_EQ(DiffSnapshots(before, WithoutSequence(TakeSnapshot(*cache), *cache,
                                                  SeqId(1))),
            "");
}

INSTANTIATE_TEST_SUITE_P(PageSizes, FragmentedRestoreTest,
                         ::testing::Values(1u, 16u));

TEST(StateFileTest, RestoreOverAnExistingTargetReplacesIt) {
  auto cache = MakeCache(SmallLayout(), 64, 4);
  AppendRandom(cache.get(), SeqId(1), 30, 1);
  const std::string file = SaveToString(*cache, SeqId(1));
  AppendRandom(cache.get(), SeqId(2), 50, 2);  // 13 pages
  const uint32_t free_before = cache->pool().num_free_pages();
  ASSERT_TRUE(Restore(file, cache.get(), SeqId(2)).ok());
  EXPECT_EQ(CellsOf(*cache, SeqId(2)), CellsOf(*cache, SeqId(1)));
  EXPECT_EQ(SequenceBytes(*cache, SeqId(2)), SequenceBytes(*cache, SeqId(1)));
  EXPECT_EQ(cache->pool().num_free_pages(), free_before + 13 - 8);
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
}

TEST(StateFileTest, ZeroTokenSequenceRestoresAnEmptyTarget) {
  auto cache = MakeCache(SmallLayout(), 16, 4);
  ASSERT_TRUE(cache->Append(SeqId(1), {}).ok());
  const std::string file = SaveToString(*cache, SeqId(1));
  EXPECT_EQ(file.size(), 128u + 8 + 24);
  AppendRandom(cache.get(), SeqId(2), 9, 2);
  for (SeqId target : {SeqId(2), SeqId(3)}) {
    StatusOr<RestoreResult> r = Restore(file, cache.get(), target);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->num_tokens, 0u);
    EXPECT_TRUE(cache->table().Contains(target));
    EXPECT_EQ(cache->table().Length(target), 0u);
  }
  EXPECT_EQ(cache->pool().num_free_pages(), 16u);
}

TEST(StateFileTest, MismatchesAreDistinctAndChangeNothing) {
  auto source = MakeCache(SmallLayout(KvDtype::kF16), 16, 4);
  AppendRandom(source.get(), SeqId(1), 10, 1);
  const std::string file = SaveToString(*source, SeqId(1));
  struct Case {
    KvLayout layout;
    ModelFingerprint fp;
    const char* reason;
    std::string message;
  };
  const Case cases[] = {
      {SmallLayout(KvDtype::kF16),
       {1, 2},
       kReasonModelMismatch,
       "model fingerprint: file has fedcba98765432100123456789abcdef, "
       "loaded model has 00000000000000020000000000000001"},
      {KvLayout{2, 2, 32, 64, KvDtype::kF16}, kTestFingerprint,
       kReasonLayoutMismatch,
       "layout: file has 2 layers x 2 KV heads x head dims 32/32, cache has "
       "2 layers x 2 KV heads x head dims 32/64"},
      {SmallLayout(KvDtype::kQ8_0), kTestFingerprint, kReasonDtypeMismatch,
       "element type: file has f16, cache has q8_0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    auto cache = MakeCache(c.layout, 16, 4);
    AppendRandom(cache.get(), SeqId(1), 5, 3);
    const CacheSnapshot before = TakeSnapshot(*cache);
    Status s = Restore(file, cache.get(), SeqId(1), {}, c.fp).status();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(s.reason(), c.reason);
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(DiffSnapshots(before, TakeSnapshot(*cache)), "");
  }
}

TEST(StateFileTest, NoRoomIsResourceExhaustedWithNumbersAndChangesNothing) {
  auto cache = MakeCache(SmallLayout(), 8, 4);  // 32 cells
  AppendRandom(cache.get(), SeqId(1), 20, 1);   // 5 pages
  const std::string file = SaveToString(*cache, SeqId(1));
  const CacheSnapshot before = TakeSnapshot(*cache);
  // Restoring over seq 1 still needs 5 fresh pages: seq 1 is kept until
  // the restore commits. Only 3 are free.
  Status s = Restore(file, cache.get(), SeqId(1)).status();
  EXPECT_TRUE(s.IsResourceExhausted()) << s;
  EXPECT_NE(s.message().find("needs 20 cells (5 pages of 4)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("3 of 8 pages free"), std::string::npos) << s;
  EXPECT_EQ(DiffSnapshots(before, TakeSnapshot(*cache)), "");
}

TEST(StateFileTest, MakeRoomIsCalledOnceAndCanFreeSpace) {
  auto cache = MakeCache(SmallLayout(), 8, 4);
  AppendRandom(cache.get(), SeqId(1), 12, 1);
  AppendRandom(cache.get(), SeqId(2), 16, 2);  // idle: may be evicted
  const std::string file = SaveToString(*cache, SeqId(1));
  const std::string want = SequenceBytes(*cache, SeqId(1));
  int calls = 0;
  RestoreOptions options;
  options.make_room = [&](uint64_t num_tokens) {
    ++calls;
    EXPECT_EQ(num_tokens, 12u);
    cache->RemoveSequence(SeqId(2));
    return Status::Ok();
  };
  ASSERT_TRUE(Restore(file, cache.get(), SeqId(3), options).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(SequenceBytes(*cache, SeqId(3)), want);

  // No call when there is room (5 pages free for 3).
  cache->RemoveSequence(SeqId(3));
  ASSERT_TRUE(Restore(file, cache.get(), SeqId(4), options).ok());
  EXPECT_EQ(calls, 1);
}

TEST(StateFileTest, MakeRoomErrorsAndUselessMakeRoomChangeNothing) {
  auto cache = MakeCache(SmallLayout(), 8, 4);
  AppendRandom(cache.get(), SeqId(1), 20, 1);
  const std::string file = SaveToString(*cache, SeqId(1));
  const CacheSnapshot before = TakeSnapshot(*cache);
  RestoreOptions options;
  int calls = 0;
  options.make_room = [&calls](uint64_t) {
    ++calls;
    return UnavailableError("every other slot is busy");
  };
  Status s = Restore(file, cache.get(), SeqId(2), options).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("every other slot is busy"), std::string::npos);
  options.make_room = [&calls](uint64_t) {
    ++calls;
    return Status::Ok();
  };
  s = Restore(file, cache.get(), SeqId(2), options).status();
  EXPECT_TRUE(s.IsResourceExhausted()) << s;
  EXPECT_NE(s.message().find("after make_room"), std::string::npos) << s;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(DiffSnapshots(before, TakeSnapshot(*cache)), "");
}

TEST(StateFileTest, Checks11To13AndChunkSwapsAreCorruption) {
  auto cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(cache.get(), SeqId(1), 9, 1);
  const std::string file =
      SaveToString(*cache, SeqId(1), ChunkOf(SmallLayout(), 3));
  const uint64_t chunk = 3 * 512 + 8;
  const uint64_t chunk0 = 128 + 9 * 8 + 8;
  const CacheSnapshot before = TakeSnapshot(*cache);
  auto expect_corrupt = [&](std::string bad, const std::string& fragment) {
    Status s = Restore(bad, cache.get(), SeqId(2)).status();
    EXPECT_TRUE(s.IsCorruption()) << s;
    EXPECT_EQ(s.reason(), kReasonChecksumMismatch) << s;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
    EXPECT_EQ(DiffSnapshots(before, TakeSnapshot(*cache)), "");
  };
  std::string bad = file;
  bad[130] ^= 1;  // token table
  expect_corrupt(bad, "token table (file bytes [128, 200)) checksum mismatch");
  bad = file;
  bad[chunk0 + chunk + 17] ^= 1;  // chunk 1's payload
  expect_corrupt(bad, "chunk 1 of 3 (file bytes [" +
                          std::to_string(chunk0 + chunk) + ", " +
                          std::to_string(chunk0 + 2 * chunk) +
                          "), tokens [3, 6)) checksum mismatch: stored 0x");
  bad = file;  // swap chunks 0 and 1, checksums included
  std::swap_ranges(bad.begin() + chunk0, bad.begin() + chunk0 + chunk,
                   bad.begin() + chunk0 + chunk);
  expect_corrupt(bad, "chunk 0 of 3");
  bad = file;
  bad[bad.size() - 16] ^= 1;  // trailer summary checksum
  expect_corrupt(bad, "summary checksum (trailer at offset " +
                          std::to_string(file.size() - 24) + ")");
  ASSERT_TRUE(Restore(file, cache.get(), SeqId(2)).ok());
}

RestoreOptions Threads(uint32_t num_threads) {
  RestoreOptions options;
  options.num_threads = num_threads;
  return options;
}

TEST(StateFileTest, LoadingWithSeveralThreadsRestoresTheSameBytes) {
  auto source = MakeCache(SmallLayout(), 512, 1);
  AppendRandom(source.get(), SeqId(1), 200, 21);
  const std::string file =
      SaveToString(*source, SeqId(1), ChunkOf(SmallLayout(), 3));  // 67
  for (uint32_t threads : {2u, 4u, 100u}) {
    auto cache = MakeCache(SmallLayout(), 512, 1);
    state_test::FragmentPool(cache.get(), 100, threads);
    StatusOr<RestoreResult> r =
        Restore(file, cache.get(), SeqId(1), Threads(threads));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(SequenceBytes(*cache, SeqId(1)),
              SequenceBytes(*source, SeqId(1)));
    EXPECT_EQ(CellsOf(*cache, SeqId(1)), CellsOf(*source, SeqId(1)));
  }
}

TEST(StateFileTest, SeveralThreadsReportTheFirstBadChunkAndChangeNothing) {
  auto cache = MakeCache(SmallLayout(), 512, 4);
  AppendRandom(cache.get(), SeqId(1), 120, 3);
  const std::string file =
      SaveToString(*cache, SeqId(1), ChunkOf(SmallLayout(), 2));  // 60
  const uint64_t chunk = 2 * 512 + 8;
  const uint64_t chunk0 = 128 + 120 * 8 + 8;
  const CacheSnapshot before = TakeSnapshot(*cache);
  for (uint32_t threads : {1u, 3u, 8u}) {
    std::string bad = file;
    bad[chunk0 + 41 * chunk + 5] ^= 1;
    bad[chunk0 + 7 * chunk + 900] ^= 1;  // the first bad one
    Status s = Restore(bad, cache.get(), SeqId(2), Threads(threads)).status();
    EXPECT_TRUE(s.IsCorruption()) << s;
    EXPECT_NE(s.message().find("chunk 7 of 60 (file bytes [" +
                               std::to_string(chunk0 + 7 * chunk) + ", "),
              std::string::npos)
        << s;
    EXPECT_EQ(DiffSnapshots(before, TakeSnapshot(*cache)), "");
  }
}

// A chunk larger than one read (kChunkReadBytes) whose stored checksum
// straddles two reads: Q8_0 rows of 34 bytes make a 68-byte cell, and 3855
// cells end 4 bytes before a read boundary.
TEST(StateFileTest, ChunksLargerThanOneReadAndASplitChecksumVerify) {
  const KvLayout layout{1, 1, 32, 32, KvDtype::kQ8_0};
  ASSERT_EQ(layout.cell_bytes(), 68u);
  ASSERT_EQ(3855 * 68 % state_internal::kChunkReadBytes,
            state_internal::kChunkReadBytes - 4);
  auto source = MakeCache(layout, 4096, 1);
  AppendRandom(source.get(), SeqId(1), 3855, 8);
  const std::string file = SaveToString(*source, SeqId(1));  // one chunk
  for (uint32_t threads : {1u, 2u}) {
    auto cache = MakeCache(layout, 4096, 1);
    ASSERT_TRUE(Restore(file, cache.get(), SeqId(1), Threads(threads)).ok());
    EXPECT_EQ(SequenceBytes(*cache, SeqId(1)),
              SequenceBytes(*source, SeqId(1)));
    for (uint64_t at : {file.size() - 24 - 1, file.size() - 24 - 8}) {
      std::string bad = file;
      bad[at] ^= 0x40;  // a byte of the chunk's stored checksum
      auto other = MakeCache(layout, 4096, 1);
      Status s = Restore(bad, other.get(), SeqId(1), Threads(threads)).status();
      EXPECT_EQ(s.reason(), kReasonChecksumMismatch) << s;
      EXPECT_FALSE(other->table().Contains(SeqId(1)));
    }
  }
}

TEST(StateFileTest, UnknownSeqNoLayoutAndScratchMisuse) {
  auto cache = MakeCache(SmallLayout(), 16, 4);
  std::string out;
  StringWritableFile sink(&out);
  Status s = WriteSequenceState(*cache, SeqId(5), kTestFingerprint, {}, &sink)
                 .status();
  EXPECT_TRUE(s.IsNotFound()) << s;
  EXPECT_NE(s.message().find("seq#5"), std::string::npos);
  EXPECT_TRUE(out.empty());

  FaultInjectingEnv env;
  s = SaveSequenceToFile(&env, *cache, SeqId(5), kTestFingerprint, "/x.kvs")
          .status();
  EXPECT_TRUE(s.IsNotFound()) << s;
  EXPECT_TRUE(env.GetChildren("/")->empty());

  KvCacheOptions options;
  options.num_pages = 4;
  auto bare = KvCache::Create(options);
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE((*bare)->Append(SeqId(1), {}).ok());
  s = WriteSequenceState(**bare, SeqId(1), kTestFingerprint, {}, &sink)
          .status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  AppendRandom(cache.get(), SeqId(1), 5, 1);
  const std::string file = SaveToString(*cache, SeqId(1));
  s = Restore(file, bare->get(), SeqId(1)).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;

  s = Restore(file, cache.get(), kRestoreScratchSeq).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  ASSERT_TRUE(cache->Append(kRestoreScratchSeq, {}).ok());
  s = Restore(file, cache.get(), SeqId(2)).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("scratch"), std::string::npos) << s;
  EXPECT_FALSE(cache->table().Contains(SeqId(2)));
}

TEST(StateFileTest, SaveToFileIsDurableAndLeavesNoTempFile) {
  FaultInjectingEnv env;
  ASSERT_TRUE(env.CreateDir("/state").ok());
  ASSERT_TRUE(env.SyncDir("/").ok());
  auto cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(cache.get(), SeqId(1), 21, 1);
  StatusOr<SaveResult> r =
      SaveSequenceToFile(&env, *cache, SeqId(1), kTestFingerprint, "/state/a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_tokens, 21u);
  EXPECT_GE(r->elapsed_ms, 0.0);
  EXPECT_EQ(*env.GetChildren("/state"), std::vector<std::string>{"a"});
  EXPECT_EQ(env.num_syncs(), 1u);
  EXPECT_EQ(env.num_dir_syncs(), 2u);  // ours above + the save's
  env.SimulateCrash();
  StatusOr<std::string> bytes = ReadFileToString(&env, "/state/a");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, SaveToString(*cache, SeqId(1)));
  EXPECT_EQ(r->bytes_written, bytes->size());

  StatusOr<RestoreResult> back = RestoreSequenceFromFile(
      &env, "/state/a", kTestFingerprint, SeqId(2), cache.get());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SequenceBytes(*cache, SeqId(2)), SequenceBytes(*cache, SeqId(1)));
}

TEST(StateFileTest, SaveWithoutSyncSkipsBothFsyncs) {
  FaultInjectingEnv env;
  auto cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(cache.get(), SeqId(1), 5, 1);
  SaveOptions options;
  options.sync = false;
  ASSERT_TRUE(SaveSequenceToFile(&env, *cache, SeqId(1), kTestFingerprint, "/a",
                                 options)
                  .ok());
  EXPECT_EQ(env.num_syncs(), 0u);
  EXPECT_EQ(env.num_dir_syncs(), 0u);
  EXPECT_TRUE(env.FileExists("/a"));
  env.SimulateCrash();  // nothing was durable
  EXPECT_FALSE(env.FileExists("/a"));
}

TEST(StateFileTest, RestoreFromFileErrorsNameThePath) {
  FaultInjectingEnv env;
  auto cache = MakeCache(SmallLayout(), 16, 4);
  Status s = RestoreSequenceFromFile(&env, "/missing.kvs", kTestFingerprint,
                                     SeqId(1), cache.get())
                 .status();
  EXPECT_TRUE(s.IsNotFound()) << s;
  ASSERT_TRUE(WriteStringToFile(&env, "KVAULTKVxx", "/short.kvs", false).ok());
  s = RestoreSequenceFromFile(&env, "/short.kvs", kTestFingerprint, SeqId(1),
                              cache.get())
          .status();
  EXPECT_EQ(s.reason(), kReasonTruncated) << s;
  EXPECT_EQ(s.message().substr(0, 12), "/short.kvs: ") << s;
}

TEST(StateFileTest, RealFilesystemRoundTripAndOverwrite) {
  char dir_template[] = "/tmp/kvault_state_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  Env* env = Env::Default();
  auto cache = MakeCache(SmallLayout(KvDtype::kQ8_0), 64, 16);
  AppendRandom(cache.get(), SeqId(1), 100, 1);
  AppendRandom(cache.get(), SeqId(2), 300, 2);
  const std::string path = JoinPath(dir, "slot.kvs");
  for (SeqId seq : {SeqId(1), SeqId(2)}) {  // the second overwrites
    StatusOr<SaveResult> r =
        SaveSequenceToFile(env, *cache, seq, kTestFingerprint, path,
                           ChunkOf(cache->storage()->layout(), 64));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*env->GetFileSize(path), r->bytes_written);
  }
  EXPECT_EQ(*env->GetChildren(dir), std::vector<std::string>{"slot.kvs"});
  StatusOr<RestoreResult> back = RestoreSequenceFromFile(
      env, path, kTestFingerprint, SeqId(1), cache.get());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_tokens, 300u);
  EXPECT_EQ(SequenceBytes(*cache, SeqId(1)), SequenceBytes(*cache, SeqId(2)));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvault
