// SlotFileMirror against a real redis-server: a file saved by name on one
// instance is fetched by another (atomically, into its own directory), per
// model; a store that is down fails uploads and fetches with counts, never
// a crash or a half-written file.
#include "kv/slot_file_mirror.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "redis_test_server.h"

namespace kvault {
namespace {

using redis_test::RedisServer;

constexpr ModelFingerprint kModel{0x1111, 0x2222};

class SlotFileMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = RedisServer::Start();
    ASSERT_NE(server_, nullptr)
        << "redis-server did not start (scripts/install-deps installs it)";
    root_ = std::filesystem::temp_directory_path() /
            ("kvault-mirror-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "a");
    std::filesystem::create_directories(root_ / "b");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string PathIn(const char* dir, const char* name) {
    return (root_ / dir / name).string();
  }
  std::unique_ptr<SlotFileMirror> Mirror(const ModelFingerprint& model) {
    return std::make_unique<SlotFileMirror>(*ParseRedisUrl(server_->url()),
                                            model, Env::Default());
  }

  std::unique_ptr<RedisServer> server_;
  std::filesystem::path root_;
};

TEST_F(SlotFileMirrorTest, AFileSavedOnOneInstanceIsFetchedByAnother) {
  const std::string bytes(100000, 'k');
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), bytes, PathIn("a", "conv.bin"), false)
          .ok());
  auto a = Mirror(kModel);
  a->Upload(PathIn("a", "conv.bin"));
  a->Flush();
  EXPECT_EQ(a->Stats().uploads, 1u);
  EXPECT_EQ(
      server_->Cli("STRLEN " + SlotFileMirror::KeyFor(kModel, "conv.bin")),
      "100000");

  auto b = Mirror(kModel);
  ASSERT_TRUE(b->FetchIfMissing(PathIn("b", "conv.bin")).ok());
  auto back = ReadFileToString(Env::Default(), PathIn("b", "conv.bin"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, bytes);
  EXPECT_EQ(b->Stats().fetches, 1u);
  // Present now: nothing is fetched again.
  ASSERT_TRUE(b->FetchIfMissing(PathIn("b", "conv.bin")).ok());
  EXPECT_EQ(b->Stats().fetches, 1u);
  // Unknown names and other models' names are not found.
  EXPECT_TRUE(b->FetchIfMissing(PathIn("b", "other.bin")).IsNotFound());
  auto other_model = Mirror(ModelFingerprint{7, 7});
  EXPECT_TRUE(
      other_model->FetchIfMissing(PathIn("b", "conv2.bin")).IsNotFound());
  ASSERT_TRUE(std::filesystem::remove(PathIn("b", "conv.bin")));
  EXPECT_TRUE(
      other_model->FetchIfMissing(PathIn("b", "conv.bin")).IsNotFound());
  EXPECT_FALSE(std::filesystem::exists(PathIn("b", "conv.bin")));
  EXPECT_EQ(b->Stats().fetch_misses, 1u);
}

TEST_F(SlotFileMirrorTest, ADownStoreCountsFailuresAndLeavesNoFile) {
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), "x", PathIn("a", "f.bin"), false).ok());
  server_->Kill();
  auto m = Mirror(kModel);
  m->Upload(PathIn("a", "f.bin"));
  m->Upload(PathIn("a", "missing.bin"));  // no such local file either
  m->Flush();
  EXPECT_EQ(m->Stats().uploads, 0u);
  EXPECT_EQ(m->Stats().upload_failures, 2u);
  const Status s = m->FetchIfMissing(PathIn("b", "f.bin"));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_EQ(m->Stats().fetch_failures, 1u);
  EXPECT_TRUE(std::filesystem::is_empty(root_ / "b"));
}

}  // namespace
}  // namespace kvault
