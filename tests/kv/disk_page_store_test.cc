// DiskPageStore: put/get/remove, the byte budget's LRU, atomic writes under
// faults and crashes, and the index rebuilt from the directory at Open().
#include "kv/disk_page_store.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"

namespace kvault {
namespace {

constexpr char kDir[] = "/pages";

PageKey Key(uint64_t i) { return PageKey{i * 0x9e3779b97f4a7c15ull, i}; }

std::string Bytes(const std::unique_ptr<RandomAccessFile>& file) {
  std::string out(file->size(), '\0');
  auto n = file->ReadAt(0, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(n.ok());
  return out;
}

class DiskPageStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskPageStore> Open(uint64_t budget) {
    auto store = DiskPageStore::Open(&env_, kDir, budget);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  FaultInjectingEnv env_;
};

TEST_F(DiskPageStoreTest, FileNamesRoundTrip) {
  EXPECT_EQ(PageRecordFileName(Key(1)), Key(1).ToHex() + ".kvpage");
  EXPECT_EQ(ParsePageRecordFileName(PageRecordFileName(Key(7))), Key(7));
  EXPECT_FALSE(ParsePageRecordFileName("seq-1.kvstate"));
  EXPECT_FALSE(ParsePageRecordFileName(Key(7).ToHex() + ".kvpage.tmp-1"));
}

TEST_F(DiskPageStoreTest, PutGetRemoveAndCounters) {
  auto store = Open(1000);
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_TRUE(store->Get(Key(1)).status().IsNotFound());
  ASSERT_TRUE(store->Put(Key(1), "record one").ok());
  ASSERT_TRUE(store->Put(Key(1), "ignored: same key, same content").ok());
  EXPECT_TRUE(store->Contains(Key(1)));
  auto file = store->Get(Key(1));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(Bytes(*file), "record one");
  ASSERT_TRUE(store->Remove(Key(1)).ok());
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_FALSE(env_.FileExists(store->PathOf(Key(1))));
  EXPECT_EQ(Bytes(*file), "record one");  // an open reader keeps its bytes
  const PageStoreStats s = store->Stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_bytes, 10u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.removals, 1u);
  EXPECT_EQ(s.num_records, 0u);
  EXPECT_EQ(s.used_bytes, 0u);
}

// The budget drops the least recently used records; a Get or a repeated Put
// counts as a use.
TEST_F(DiskPageStoreTest, BudgetDropsLeastRecentlyUsed) {
  auto store = Open(30);
  ASSERT_TRUE(store->Put(Key(1), std::string(10, 'a')).ok());
  ASSERT_TRUE(store->Put(Key(2), std::string(10, 'b')).ok());
  ASSERT_TRUE(store->Put(Key(3), std::string(10, 'c')).ok());
  ASSERT_TRUE(store->Get(Key(1)).ok());      // 1 is now the newest
  ASSERT_TRUE(store->Put(Key(2), "x").ok());  // and then 2
  ASSERT_TRUE(store->Put(Key(4), std::string(15, 'd')).ok());
  EXPECT_FALSE(store->Contains(Key(3)));
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_TRUE(store->Contains(Key(2)));
  EXPECT_TRUE(store->Contains(Key(4)));
  EXPECT_EQ(store->Stats().evictions, 2u);
  EXPECT_EQ(store->Stats().used_bytes, 25u);
  EXPECT_FALSE(env_.FileExists(store->PathOf(Key(3))));
  EXPECT_EQ(store->Put(Key(5), std::string(31, 'e')).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(store->Contains(Key(2)));  // nothing dropped for it
}

// Open() finds the records a previous process wrote, drops temporary files
// of interrupted writes, leaves unrelated files, and applies a lowered
// budget.
TEST_F(DiskPageStoreTest, ReopenRebuildsTheIndexFromTheDirectory) {
  {
    auto store = Open(100);
    ASSERT_TRUE(store->Put(Key(1), "one").ok());
    ASSERT_TRUE(store->Put(Key(2), "two!").ok());
  }
  auto tmp = env_.NewWritableFile(std::string(kDir) + "/" +
                                  PageRecordFileName(Key(3)) + ".tmp-1f");
  ASSERT_TRUE(tmp.ok());
  ASSERT_TRUE((*tmp)->Append(std::string_view("half")).ok());
  ASSERT_TRUE((*tmp)->Close().ok());
  auto other = env_.NewWritableFile(std::string(kDir) + "/notes.txt");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Close().ok());

  auto store = Open(100);
  EXPECT_TRUE(store->Contains(Key(1)));
  EXPECT_TRUE(store->Contains(Key(2)));
  EXPECT_FALSE(store->Contains(Key(3)));
  EXPECT_EQ(store->Stats().used_bytes, 7u);
  EXPECT_EQ(Bytes(*store->Get(Key(2))), "two!");
  auto names = env_.GetChildren(kDir);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 3u);  // two records and notes.txt
  store.reset();
  EXPECT_EQ(Open(4)->Stats().num_records, 1u);  // lowered budget
}

// A failed write stores nothing and leaves no file; after a crash every
// record Put returned OK for is there, whole.
TEST_F(DiskPageStoreTest, FailedWritesAndCrashesKeepRecordsWhole) {
  auto store = Open(1000);
  ASSERT_TRUE(store->Put(Key(1), "durable").ok());
  env_.FailNthWrite(1, {FaultKind::kNoSpace, false, 3});
  EXPECT_EQ(store->Put(Key(2), "lost").code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(store->Contains(Key(2)));
  env_.FailNthRename(1);
  EXPECT_FALSE(store->Put(Key(3), "lost too").ok());
  EXPECT_FALSE(store->Contains(Key(3)));
  EXPECT_EQ(store->Stats().used_bytes, 7u);
  store.reset();
  env_.SimulateCrash();
  store = Open(1000);
  EXPECT_EQ(store->Stats().num_records, 1u);
  EXPECT_EQ(Bytes(*store->Get(Key(1))), "durable");
}

TEST_F(DiskPageStoreTest, AFileDeletedBehindItsBackIsForgotten) {
  auto store = Open(1000);
  ASSERT_TRUE(store->Put(Key(1), "gone soon").ok());
  ASSERT_TRUE(env_.RemoveFile(store->PathOf(Key(1))).ok());
  EXPECT_TRUE(store->Get(Key(1)).status().IsNotFound());
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_EQ(store->Stats().used_bytes, 0u);
}

// Regression (issue 40): on the real filesystem, a directory with a
// record's name (a) made Open refuse to start when the store was over
// budget and (b) at run time blocked every eviction, so every publish
// failed; and (c) after the store's directory was removed while running,
// it was never made again.
class DiskPageStoreRealFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/kvault_pages_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    root_ = dir_template;
    dir_ = JoinPath(root_, "prefix");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::unique_ptr<DiskPageStore> Open(uint64_t budget) {
    auto store = DiskPageStore::Open(Env::Default(), dir_, budget,
                                     /*sync=*/false);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  std::string root_;
  std::string dir_;
};

TEST_F(DiskPageStoreRealFsTest, ADirectoryWithARecordNameIsSkippedAtOpen) {
  {
    auto store = Open(100);
    ASSERT_TRUE(store->Put(Key(1), std::string(60, 'a')).ok());
  }
  ASSERT_EQ(mkdir(JoinPath(dir_, PageRecordFileName(Key(2))).c_str(), 0755), 0);
  auto store = Open(50);  // over budget: record 1 is evicted, not the dir
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->Contains(Key(2)));
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_EQ(store->Stats().foreign_entries, 1u);
  EXPECT_TRUE(store->Put(Key(3), std::string(40, 'c')).ok());
  EXPECT_TRUE(store->Contains(Key(3)));
}

TEST_F(DiskPageStoreRealFsTest, ARecordReplacedByADirectoryDoesNotBlockEviction) {
  auto store = Open(100);
  ASSERT_TRUE(store->Put(Key(1), std::string(60, 'a')).ok());
  const std::string path = store->PathOf(Key(1));
  ASSERT_TRUE(std::filesystem::remove(path));
  ASSERT_TRUE(std::filesystem::create_directory(path));
  ASSERT_TRUE(std::filesystem::create_directory(JoinPath(path, "inside")));
  for (uint64_t k = 2; k < 6; ++k) {
    const Status put = store->Put(Key(k), std::string(60, 'b'));
    EXPECT_TRUE(put.ok()) << "publish " << k << ": " << put;
    EXPECT_TRUE(store->Contains(Key(k)));
  }
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_GE(store->Stats().foreign_entries, 1u);
  EXPECT_LE(store->Stats().used_bytes, 100u);
}

TEST_F(DiskPageStoreRealFsTest, ARemovedDirectoryIsMadeAgain) {
  auto store = Open(1000);
  ASSERT_TRUE(store->Put(Key(1), "one").ok());
  std::filesystem::remove_all(dir_);
  const Status put = store->Put(Key(2), "two");
  ASSERT_TRUE(put.ok()) << put;
  auto file = store->Get(Key(2));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(Bytes(*file), "two");
  EXPECT_TRUE(store->Get(Key(1)).status().IsNotFound());
  EXPECT_FALSE(store->Contains(Key(1)));  // forgotten on its miss
}

}  // namespace
}  // namespace kvault
