// Crash and fault semantics of FaultInjectingEnv. The POSIX-parity of the
// plain filesystem operations lives in env_test.cc.
#include "core/fault_injecting_env.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kvault {
namespace {

class FaultInjectingEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.CreateDir("/d").ok());
    ASSERT_TRUE(env_.SyncDir("/").ok());
  }

  // Writes `data` to `path`, syncs the file and (optionally) its directory.
  void WriteDurably(const std::string& path, std::string_view data,
                    bool sync_dir = true) {
    ASSERT_TRUE(WriteStringToFile(&env_, data, path, /*sync=*/true).ok());
    if (sync_dir) {
      ASSERT_TRUE(env_.SyncDir(DirName(path)).ok());
    }
  }

  // Returns the contents of `path`, or "<missing>".
  std::string Contents(const std::string& path) {
    if (!env_.FileExists(path)) return "<missing>";
    StatusOr<std::string> s = ReadFileToString(&env_, path);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : "<error>";
  }

  FaultInjectingEnv env_;
};

TEST_F(FaultInjectingEnvTest, SyncedAndDirSyncedFileSurvivesCrash) {
  WriteDurably("/d/f", "durable");
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/f"), "durable");
}

TEST_F(FaultInjectingEnvTest, UnsyncedAppendsAreLost) {
  WriteDurably("/d/f", "synced");
  auto file = env_.NewWritableFile("/d/g");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("head").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Append("+tail").ok());
  ASSERT_TRUE(env_.SyncDir("/d").ok());
  EXPECT_EQ(Contents("/d/g"), "head+tail");
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/g"), "head");
  EXPECT_EQ(Contents("/d/f"), "synced");
}

TEST_F(FaultInjectingEnvTest, CreateWithoutDirSyncDisappears) {
  WriteDurably("/d/f", "synced but never linked durably", /*sync_dir=*/false);
  env_.SimulateCrash();
  EXPECT_FALSE(env_.FileExists("/d/f"));
}

TEST_F(FaultInjectingEnvTest, RenameWithoutDirSyncReverts) {
  WriteDurably("/d/state", "old");
  WriteDurably("/d/state.tmp", "new", /*sync_dir=*/false);
  ASSERT_TRUE(env_.RenameFile("/d/state.tmp", "/d/state").ok());
  EXPECT_EQ(Contents("/d/state"), "new");
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/state"), "old");
  EXPECT_FALSE(env_.FileExists("/d/state.tmp")) << "its create was not synced";
}

TEST_F(FaultInjectingEnvTest, RenameOfDurableTempRevertsToBothNames) {
  WriteDurably("/d/state", "old");
  WriteDurably("/d/state.tmp", "new");
  ASSERT_TRUE(env_.RenameFile("/d/state.tmp", "/d/state").ok());
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/state"), "old");
  EXPECT_EQ(Contents("/d/state.tmp"), "new");
}

TEST_F(FaultInjectingEnvTest, RenameThenDirSyncIsDurable) {
  WriteDurably("/d/state", "old");
  WriteDurably("/d/state.tmp", "new", /*sync_dir=*/false);
  ASSERT_TRUE(env_.RenameFile("/d/state.tmp", "/d/state").ok());
  ASSERT_TRUE(env_.SyncDir("/d").ok());
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/state"), "new");
  EXPECT_FALSE(env_.FileExists("/d/state.tmp"));
}

TEST_F(FaultInjectingEnvTest, RemoveWithoutDirSyncReverts) {
  WriteDurably("/d/f", "kept");
  ASSERT_TRUE(env_.RemoveFile("/d/f").ok());
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/f"), "kept");
  ASSERT_TRUE(env_.RemoveFile("/d/f").ok());
  ASSERT_TRUE(env_.SyncDir("/d").ok());
  env_.SimulateCrash();
  EXPECT_FALSE(env_.FileExists("/d/f"));
}

TEST_F(FaultInjectingEnvTest, UnsyncedTruncateReverts) {
  WriteDurably("/d/f", "v1");
  // Rewriting an existing name reuses its inode, so no SyncDir is needed.
  WriteDurably("/d/f", "v2", /*sync_dir=*/false);
  ASSERT_TRUE(WriteStringToFile(&env_, "v3", "/d/f", /*sync=*/false).ok());
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/f"), "v2") << "the last Sync wins";
}

TEST_F(FaultInjectingEnvTest, SyncDirCoversOnlyItsOwnDirectory) {
  ASSERT_TRUE(env_.CreateDir("/e").ok());
  ASSERT_TRUE(env_.SyncDir("/").ok());
  WriteDurably("/d/f", "f", /*sync_dir=*/false);
  WriteDurably("/e/g", "g", /*sync_dir=*/false);
  ASSERT_TRUE(env_.SyncDir("/e").ok());
  env_.SimulateCrash();
  EXPECT_FALSE(env_.FileExists("/d/f"));
  EXPECT_EQ(Contents("/e/g"), "g");
}

TEST_F(FaultInjectingEnvTest, DirectoryNotDurableTakesItsSubtree) {
  ASSERT_TRUE(env_.CreateDir("/new").ok());
  ASSERT_TRUE(env_.CreateDir("/new/sub").ok());
  ASSERT_TRUE(env_.SyncDir("/new").ok());
  WriteDurably("/new/sub/f", "f");  // durable within a non-durable dir
  env_.SimulateCrash();
  EXPECT_FALSE(env_.FileExists("/new"));
  EXPECT_FALSE(env_.FileExists("/new/sub"));
  EXPECT_FALSE(env_.FileExists("/new/sub/f"));
  StatusOr<std::vector<std::string>> root = env_.GetChildren("/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root, std::vector<std::string>{"d"});
}

TEST_F(FaultInjectingEnvTest, DurableDirectoryTreeSurvives) {
  ASSERT_TRUE(env_.CreateDir("/new").ok());
  ASSERT_TRUE(env_.SyncDir("/").ok());
  WriteDurably("/new/f", "f");
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/new/f"), "f");
}

TEST_F(FaultInjectingEnvTest, HandlesFromBeforeCrashFail) {
  WriteDurably("/d/f", "abc");
  auto writer = env_.NewWritableFile("/d/w");
  auto reader = env_.NewSequentialFile("/d/f");
  auto random = env_.NewRandomAccessFile("/d/f");
  ASSERT_TRUE(writer.ok() && reader.ok() && random.ok());
  env_.SimulateCrash();
  std::byte buf[4];
  EXPECT_EQ((*writer)->Append("x").code(), StatusCode::kIOError);
  EXPECT_EQ((*writer)->Sync().code(), StatusCode::kIOError);
  EXPECT_EQ((*reader)->Read(buf).status().code(), StatusCode::kIOError);
  EXPECT_EQ((*reader)->Skip(1).code(), StatusCode::kIOError);
  EXPECT_EQ((*random)->ReadAt(0, buf).status().code(), StatusCode::kIOError);
  EXPECT_EQ(Contents("/d/f"), "abc") << "new handles work";
}

TEST_F(FaultInjectingEnvTest, CrashIsIdempotent) {
  WriteDurably("/d/f", "f");
  WriteDurably("/d/lost", "lost", /*sync_dir=*/false);
  env_.SimulateCrash();
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/f"), "f");
  EXPECT_FALSE(env_.FileExists("/d/lost"));
}

// Appends `chunks` to `path` one Append each, stopping at the first error.
Status WriteChunks(Env* env, const std::string& path,
                   const std::vector<std::string>& chunks) {
  KV_ASSIGN_OR_RETURN(auto file, env->NewWritableFile(path));
  for (const std::string& chunk : chunks) {
    KV_RETURN_IF_ERROR(file->Append(chunk));
  }
  KV_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

TEST_F(FaultInjectingEnvTest, FailNthWriteForEveryN) {
  const std::vector<std::string> chunks = {"aa", "bbb", "c", "dddd", "ee"};
  const uint64_t before = env_.num_appends();
  ASSERT_TRUE(WriteChunks(&env_, "/d/probe", chunks).ok());
  const uint64_t num_appends = env_.num_appends() - before;
  ASSERT_EQ(num_appends, chunks.size());
  for (uint64_t n = 1; n <= num_appends; ++n) {
    SCOPED_TRACE("failing append " + std::to_string(n));
    FaultInjectingEnv env;
    env.FailNthWrite(n, {.kind = FaultKind::kNoSpace});
    Status s = WriteChunks(&env, "/f", chunks);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("injected"), std::string_view::npos) << s;
    EXPECT_EQ(env.num_appends(), n) << "the workload stops at the failure";
    std::string expected;
    for (uint64_t i = 0; i + 1 < n; ++i) expected += chunks[i];
    StatusOr<std::string> contents = ReadFileToString(&env, "/f");
    ASSERT_TRUE(contents.ok());
    EXPECT_EQ(*contents, expected);
  }
}

TEST_F(FaultInjectingEnvTest, FaultCountsFromArmingTime) {
  auto file = env_.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*file)->Append("x").ok());
  env_.FailNthWrite(2);
  EXPECT_TRUE((*file)->Append("1").ok());
  Status s = (*file)->Append("2");
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s;
  EXPECT_TRUE((*file)->Append("3").ok()) << "non-sticky fails once";
  EXPECT_EQ(env_.num_appends(), 8u);
  EXPECT_EQ(Contents("/d/f"), "xxxxx13");
}

TEST_F(FaultInjectingEnvTest, StickyFaultKeepsFailingUntilCleared) {
  auto file = env_.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  env_.FailNthWrite(2, {.sticky = true});
  EXPECT_TRUE((*file)->Append("a").ok());
  EXPECT_FALSE((*file)->Append("b").ok());
  EXPECT_FALSE((*file)->Append("c").ok());
  env_.ClearFaults();
  EXPECT_TRUE((*file)->Append("d").ok());
  EXPECT_EQ(Contents("/d/f"), "ad");
}

TEST_F(FaultInjectingEnvTest, ShortWriteLeavesExactlyThePartialBytes) {
  auto file = env_.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("keep|").ok());
  env_.FailNthWrite(1, {.num_partial_bytes = 3});
  EXPECT_EQ((*file)->Append("abcdef").code(), StatusCode::kIOError);
  EXPECT_EQ(Contents("/d/f"), "keep|abc");
  env_.FailNthWrite(1, {.num_partial_bytes = 100});  // clamped
  EXPECT_FALSE((*file)->Append("xy").ok());
  EXPECT_EQ(Contents("/d/f"), "keep|abcxy");
}

TEST_F(FaultInjectingEnvTest, StickyShortWriteIsShortOnlyOnce) {
  auto file = env_.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  env_.FailNthWrite(
      1, {.kind = FaultKind::kNoSpace, .sticky = true, .num_partial_bytes = 2});
  EXPECT_EQ((*file)->Append("abcd").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*file)->Append("efgh").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Contents("/d/f"), "ab") << "a full disk stays full";
}

TEST_F(FaultInjectingEnvTest, FailedSyncLeavesDataVolatile) {
  auto file = env_.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(env_.SyncDir("/d").ok());
  ASSERT_TRUE((*file)->Append("data").ok());
  env_.FailNthSync(1);
  EXPECT_EQ((*file)->Sync().code(), StatusCode::kIOError);
  EXPECT_EQ(env_.num_syncs(), 1u);
  env_.SimulateCrash();
  EXPECT_EQ(Contents("/d/f"), "");
}

TEST_F(FaultInjectingEnvTest, FailedRenameChangesNothing) {
  WriteDurably("/d/a", "a");
  WriteDurably("/d/b", "b");
  env_.FailNthRename(1, {.kind = FaultKind::kNoSpace});
  EXPECT_EQ(env_.RenameFile("/d/a", "/d/b").code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Contents("/d/a"), "a");
  EXPECT_EQ(Contents("/d/b"), "b");
  EXPECT_EQ(env_.num_renames(), 1u);
  EXPECT_TRUE(env_.RenameFile("/d/a", "/d/b").ok());
  EXPECT_EQ(Contents("/d/b"), "a");
}

TEST_F(FaultInjectingEnvTest, FailedSyncDirMakesNothingDurable) {
  WriteDurably("/d/f", "f", /*sync_dir=*/false);
  env_.FailNthSyncDir(1);
  const uint64_t before = env_.num_dir_syncs();
  EXPECT_EQ(env_.SyncDir("/d").code(), StatusCode::kIOError);
  EXPECT_EQ(env_.num_dir_syncs(), before + 1);
  env_.SimulateCrash();
  EXPECT_FALSE(env_.FileExists("/d/f"));
}

TEST_F(FaultInjectingEnvTest, FailNthReadHitsSequentialAndRandomReads) {
  WriteDurably("/d/f", "0123456789");
  auto seq = env_.NewSequentialFile("/d/f");
  auto random = env_.NewRandomAccessFile("/d/f");
  ASSERT_TRUE(seq.ok() && random.ok());
  std::byte buf[4];
  const uint64_t before = env_.num_reads();
  env_.FailNthRead(2);
  EXPECT_TRUE((*seq)->Read(buf).ok());
  EXPECT_EQ((*random)->ReadAt(0, buf).status().code(), StatusCode::kIOError);
  StatusOr<size_t> n = (*seq)->Read(buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(buf[0], std::byte{'4'}) << "the failed read did not move anyone";
  EXPECT_EQ(env_.num_reads(), before + 3);
}

TEST_F(FaultInjectingEnvTest, ZeroIsNotAValidOrdinal) {
  EXPECT_DEATH(env_.FailNthWrite(0), "1-based");
}

TEST_F(FaultInjectingEnvTest, FakeClockMovesOnlyWhenAdvanced) {
  EXPECT_EQ(env_.NowMicros(), 0u);
  env_.AdvanceMicros(1500);
  EXPECT_EQ(env_.NowMicros(), 1500u);
}

TEST_F(FaultInjectingEnvTest, ConcurrentWritersToDistinctFiles) {
  constexpr int kNumThreads = 4;
  constexpr int kNumAppends = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kNumThreads; ++t) {
    threads.emplace_back([this, t] {
      auto file = env_.NewWritableFile("/d/t" + std::to_string(t));
      ASSERT_TRUE(file.ok());
      for (int i = 0; i < kNumAppends; ++i) {
        ASSERT_TRUE((*file)->Append(std::string(1, char('a' + t))).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(env_.num_appends(), uint64_t{kNumThreads * kNumAppends});
  for (int t = 0; t < kNumThreads; ++t) {
    EXPECT_EQ(Contents("/d/t" + std::to_string(t)),
              std::string(kNumAppends, char('a' + t)));
  }
}

}  // namespace
}  // namespace kvault
