// End to end, issue 17 ("Hardening") regressions on the real binary: slot
// files that are not regular files, temporary files, name limits, a missing
// save directory, failed slot actions in /metrics, and the new flags.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

class SlotHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = SharedPath("models/stories260K.gguf");
    if (!FileExists(model_)) GTEST_SKIP() << "missing " << model_;
    dir_ = MakeTempDir("hardening");
    ASSERT_FALSE(dir_.empty());
  }

  // `extra`: more flags, e.g. a small pool without a spill tier.
  void StartServer(const std::string& save_dir,
                   const std::vector<std::string>& extra = {"-c", "1024"}) {
    std::vector<std::string> args = {"-m",         model_, "--slot-save-path",
                                     save_dir,     "-t",   "1",
                                     "--no-fsync", "-np",  "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = ServerProcess::Start(args);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = std::move(*p);
    client_ = std::make_unique<HttpClient>(server_->port());
  }

  // A greedy completion on `slot`.
  Reply Complete(int slot, const std::string& prompt, int n_predict,
                 bool cache_prompt = true) {
    return client_->Post("/completion", {{"prompt", prompt},
                                         {"n_predict", n_predict},
                                         {"temperature", 0},
                                         {"id_slot", slot},
                                         {"cache_prompt", cache_prompt}});
  }

  Reply SlotAction(int slot, const std::string& action,
                   const std::string& filename) {
    return client_->Post("/slots/" + std::to_string(slot) + "?action=" + action,
                         json{{"filename", filename}});
  }

  std::string model_;
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
};

// Regression: restoring from a FIFO blocked in open() and froze the engine.
TEST_F(SlotHardeningTest, FifoAndSymlinkAreRefusedAtOnce) {
  StartServer(dir_);
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.bin").c_str(), 0644), 0);
  Reply fifo = SlotAction(1, "restore", "fifo.bin");
  EXPECT_EQ(fifo.status, 400) << fifo.raw;
  EXPECT_EQ(fifo.body["reason"], "not_regular_file") << fifo.raw;
  ASSERT_EQ(::symlink("/etc/hostname", (dir_ + "/link.bin").c_str()), 0);
  Reply link = SlotAction(1, "restore", "link.bin");
  EXPECT_EQ(link.status, 400) << link.raw;
  EXPECT_EQ(link.body["reason"], "not_regular_file") << link.raw;
  Reply done = client_->Post(
      "/completion",
      {{"prompt", "Once upon a time"}, {"n_predict", 4}, {"id_slot", 0}});
  EXPECT_EQ(done.status, 200) << done.raw;
}

// Regression: temp files of a killed save stayed and could be restored.
TEST_F(SlotHardeningTest, StaleTempFilesAreRemovedAndRefusedByName) {
  const std::string stale = "conv.bin.tmp-0000a1b20000000c";
  std::ofstream(dir_ + "/" + stale) << "half a save";
  std::ofstream(dir_ + "/keep.bin") << "not ours to remove";
  StartServer(dir_);
  EXPECT_FALSE(FileExists(dir_ + "/" + stale));
  EXPECT_TRUE(FileExists(dir_ + "/keep.bin"));
  Reply r = SlotAction(0, "restore", stale);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["reason"], "invalid_filename") << r.raw;
}

// Regression: 235-255-byte names passed validation and then failed with a
// 500; a missing save directory made every save a 404.
TEST_F(SlotHardeningTest, NameLimitUpFrontAndMissingDirectoryCreated) {
  const std::string sub = dir_ + "/created-at-start";
  StartServer(sub);
  struct stat st;
  ASSERT_EQ(::stat(sub.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  Reply long_name = SlotAction(0, "save", std::string(240, 'x'));
  EXPECT_EQ(long_name.status, 400) << long_name.raw;
  EXPECT_EQ(long_name.body["reason"], "invalid_filename");
  EXPECT_NE(long_name.raw.find("at most 234"), std::string::npos)
      << long_name.raw;
  Reply done = client_->Post(
      "/completion",
      {{"prompt", "Once upon a time"}, {"n_predict", 4}, {"id_slot", 0}});
  ASSERT_EQ(done.status, 200) << done.raw;
  Reply saved = SlotAction(0, "save", std::string(234, 'y'));
  EXPECT_EQ(saved.status, 200) << saved.raw;
}

// Regression: kvault_requests_failed_total stayed 0 after failed saves.
TEST_F(SlotHardeningTest, FailedSlotActionsCountInMetrics) {
  StartServer(dir_);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(SlotAction(1, "save", "empty.bin").status, 400);  // slot_empty
  }
  EXPECT_EQ(SlotAction(1, "save", "a/b").status, 400);  // invalid_filename
  Reply metrics = client_->Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.raw.find("\nkvault_requests_failed_total 4\n"),
            std::string::npos)
      << metrics.raw;
}

// Regression (fault 6): with --spill-ram 0 and no disk tier a restore into
// a full slot got 503 no_room, needing room for old and new KV at once.
TEST_F(SlotHardeningTest, RestoreIntoAFullSlotWithoutAnyTier) {
  StartServer(dir_, {"-c", "64", "--kv-unified", "--page-size", "16",
                     "--spill-ram", "0"});
  const std::string story = "Once upon a time, there was a little girl";
  Reply before = Complete(0, story, 8);
  ASSERT_EQ(before.status, 200) << before.raw;
  Reply saved = SlotAction(0, "save", "story.bin");
  ASSERT_EQ(saved.status, 200) << saved.raw;
  const int n_saved = saved.body["n_saved"];
  ASSERT_GT(n_saved, 16);  // 2 pages
  Reply fill = Complete(0,
                        "The sun was shining and the birds were singing in "
                        "the big green park by the river",
                        4, false);
  ASSERT_EQ(fill.status, 200) << fill.raw;
  ASSERT_GT(fill.body["tokens_cached"].get<int>(), 32);  // 3 pages: 1 free
  Reply restored = SlotAction(0, "restore", "story.bin");
  ASSERT_EQ(restored.status, 200) << restored.raw;
  EXPECT_EQ(restored.body["n_restored"], n_saved);
  Reply after = Complete(0, story, 8);
  ASSERT_EQ(after.status, 200) << after.raw;
  EXPECT_EQ(after.body["content"], before.body["content"]);
  EXPECT_GT(after.body["timings"]["cache_n"].get<int>(), 0) << after.raw;
}

TEST(ServeHelpTest, ListsTheNewFlags) {
  FILE* out =
      ::popen((std::string(KVAULT_BINARY) + " serve --help").c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), out)) text.append(buf, n);
  EXPECT_EQ(::pclose(out), 0);
  EXPECT_NE(text.find("--on-kv-full refuse|drop-lru"), std::string::npos);
  EXPECT_NE(text.find("--slot-io-timeout"), std::string::npos);
}

}  // namespace
}  // namespace kvault::e2e
