// End to end: the seed request's workflow on the real binary. Save a slot,
// continue elsewhere, restore into fragmented and full pools, and every
// error path of POST /slots/{id}.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

const char kStory[] = "Once upon a time, there was a little girl named Lily.";
const char kMore[] = " She went to the park and saw a big dog.";

class SlotFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = SharedPath("models/stories260K.gguf");
    if (!FileExists(model_)) GTEST_SKIP() << "missing " << model_;
    dir_ = MakeTempDir("slots");
    ASSERT_FALSE(dir_.empty());
  }

  // Starts a server on `model` with `extra` flags and the save path.
  void StartServer(std::vector<std::string> extra,
                   const std::string& model = "") {
    std::vector<std::string> args = {"-m", model.empty() ? model_ : model,
                                     "--slot-save-path", dir_, "-t", "1",
                                     "--no-fsync"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = ServerProcess::Start(args);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = std::move(*p);
    client_ = std::make_unique<HttpClient>(server_->port());
  }

  // A greedy completion; ignore_eos keeps lengths predictable.
  json Complete(const std::string& prompt, int slot, int n_predict = 16,
                bool cache_prompt = true) {
    Reply r = client_->Post("/completion",
                            {{"prompt", prompt},
                             {"n_predict", n_predict},
                             {"temperature", 0},
                             {"id_slot", slot},
                             {"ignore_eos", true},
                             {"cache_prompt", cache_prompt}});
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }

  Reply SlotAction(int slot, const std::string& action,
                   const std::string& filename) {
    json body = json::object();
    if (!filename.empty()) body["filename"] = filename;
    return client_->Post(
        "/slots/" + std::to_string(slot) + "?action=" + action, body);
  }

  std::string model_;
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(SlotFilesTest, SaveReuseRestoreContinueIdentically) {
  // Without the prefix cache slot 0 could take turn 2's prefix from slot 1
  // instead of from the restored file.
  StartServer({"-np", "2", "-c", "2048", "--no-prefix-cache"});
  const json first = Complete(kStory, 1);
  const uint64_t cached = first["tokens_cached"];
  ASSERT_GT(cached, 0u);

  Reply saved = SlotAction(1, "save", "lily.bin");
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(saved.body["id_slot"], 1);
  EXPECT_EQ(saved.body["filename"], "lily.bin");
  EXPECT_EQ(saved.body["n_saved"], cached);
  EXPECT_GT(saved.body["n_written"].get<uint64_t>(), 0u);
  EXPECT_TRUE(saved.body["timings"].contains("save_ms"));

  // The conversation goes on in slot 1: only the new tokens are evaluated.
  const std::string turn2 =
      kStory + first["content"].get<std::string>() + kMore;
  const json second = Complete(turn2, 1);
  const json& t2 = second["timings"];
  EXPECT_GT(t2["cache_n"].get<uint64_t>(), 0u);
  EXPECT_EQ(t2["prompt_n"].get<uint64_t>() + t2["cache_n"].get<uint64_t>(),
            second["tokens_evaluated"].get<uint64_t>());

  // Slot 0 gets the saved state and continues exactly like slot 1 did.
  Reply restored = SlotAction(0, "restore", "lily.bin");
  ASSERT_EQ(restored.status, 200) << restored.raw;
  EXPECT_EQ(restored.body["id_slot"], 0);
  EXPECT_EQ(restored.body["n_restored"], cached);
  EXPECT_EQ(restored.body["n_read"], saved.body["n_written"]);
  EXPECT_TRUE(restored.body["timings"].contains("restore_ms"));
  const json from_restore = Complete(turn2, 0);
  EXPECT_EQ(from_restore["content"], second["content"]);
  EXPECT_EQ(from_restore["timings"]["cache_n"], t2["cache_n"]);

  // Slot 1 was not disturbed: asking again reuses all but the last token.
  const json again = Complete(turn2, 1);
  EXPECT_EQ(again["content"], second["content"]);
  EXPECT_EQ(again["timings"]["prompt_n"], 1);

  // And both equal a cold run of the same prompt.
  Reply erased = SlotAction(0, "erase", "");
  ASSERT_EQ(erased.status, 200) << erased.raw;
  EXPECT_EQ(erased.body["id_slot"], 0);
  EXPECT_GT(erased.body["n_erased"].get<uint64_t>(), 0u);
  const json cold = Complete(turn2, 0, 16, /*cache_prompt=*/false);
  EXPECT_EQ(cold["content"], second["content"]);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");
}

// The prefix cache: a request in slot 1 whose prompt starts with what slot
// 0 holds takes those pages (whole 16-cell pages, shared, not copied) and
// evaluates only the rest, with the output of a cold run.
TEST_F(SlotFilesTest, AnotherSlotsPromptPrefixIsSharedNotRecomputed) {
  StartServer({"-np", "2", "-c", "2048", "--page-size", "16"});
  const std::string story = std::string(kStory) + kMore + kMore + kMore;
  const json a = Complete(story, 0, 8);
  const uint64_t a_prompt = a["tokens_evaluated"];
  ASSERT_GE(a_prompt, 48u);
  const std::string turn = story + " Then they went home.";
  const json b = Complete(turn, 1);
  const uint64_t cache_n = b["timings"]["cache_n"];
  EXPECT_EQ(cache_n % 16, 0u);
  EXPECT_GE(cache_n, a_prompt / 16 * 16 - 16);  // the prompts may differ at
                                                // the seam's last token
  EXPECT_EQ(b["timings"]["prompt_n"].get<uint64_t>() + cache_n,
            b["tokens_evaluated"].get<uint64_t>());
  Reply metrics = client_->Get("/metrics");
  EXPECT_EQ(MetricValue(metrics.raw, "kvault_prompt_tokens_shared_total"),
            static_cast<double>(cache_n))
      << metrics.raw;
  // Slot 0 is unchanged by the sharing: its own prompt again reuses all but
  // the last token.
  EXPECT_EQ(Complete(story, 0, 8)["timings"]["prompt_n"], 1);
  const json cold = Complete(turn, 1, 16, /*cache_prompt=*/false);
  EXPECT_EQ(cold["timings"]["cache_n"], 0);
  EXPECT_EQ(cold["content"], b["content"]);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");
}

// The persistent prefix store: after kill -9 and a restart, a conversation
// continues with its earlier pages loaded from disk (only the rest is
// evaluated) and the output of a cold run; damaged records are refused,
// counted and removed, and the request still succeeds.
TEST_F(SlotFilesTest, PrefixStoreContinuesAConversationAfterKill9) {
  const std::string spill = MakeTempDir("spill");
  const std::vector<std::string> args = {
      "-np",          "1",   "-c",          "2048", "--page-size", "16",
      "--spill-dir",  spill, "--spill-disk", "64M",  "--prefix-disk", "64M"};
  StartServer(args);
  if (HasFatalFailure()) return;
  const std::string story = std::string(kStory) + kMore + kMore + kMore;
  const json first = Complete(story, 0);
  const std::string turn2 = story + first["content"].get<std::string>() + kMore;
  kill(server_->pid(), SIGKILL);
  server_.reset();

  StartServer(args);
  if (HasFatalFailure()) return;
  const json second = Complete(turn2, 0);
  const uint64_t cache_n = second["timings"]["cache_n"];
  EXPECT_GE(cache_n, 32u);
  const uint64_t prompt_n = second["timings"]["prompt_n"];
  EXPECT_EQ(prompt_n + cache_n, second["tokens_evaluated"].get<uint64_t>());
  // Only what turn 1's KV lacks is evaluated (its prompt and 15 of its 16
  // generated tokens are in KV): whole pages and the tail come back.
  EXPECT_LE(prompt_n, second["tokens_evaluated"].get<uint64_t>() -
                          (first["tokens_evaluated"].get<uint64_t>() + 15));
  std::string metrics = client_->Get("/metrics").raw;
  EXPECT_EQ(MetricValue(metrics, "kvault_prompt_tokens_from_store_total"),
            static_cast<double>(cache_n))
      << metrics;
  const uint64_t records = (cache_n + 15) / 16;  // pages, and a tail
  EXPECT_EQ(MetricValue(metrics, "kvault_prefix_store_pages_loaded_total"),
            static_cast<double>(records));
  EXPECT_EQ(MetricValue(metrics, "kvault_prefix_store_hits_total"),
            static_cast<double>(records));
  const json cold = Complete(turn2, 0, 16, /*cache_prompt=*/false);
  EXPECT_EQ(cold["timings"]["cache_n"], 0);
  EXPECT_EQ(second["content"], cold["content"]);
  kill(server_->pid(), SIGKILL);
  server_.reset();

  // Flip one byte in the middle of every record.
  int damaged = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(spill + "/prefix")) {
    std::fstream f(entry.path(), std::ios::in | std::ios::out |
                                     std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff middle = f.tellg() / 2;
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(middle);
    f.write(&c, 1);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  StartServer(args);
  if (HasFatalFailure()) return;
  const json third = Complete(turn2, 0);
  EXPECT_EQ(third["timings"]["cache_n"], 0);
  EXPECT_EQ(third["content"], cold["content"]);
  metrics = client_->Get("/metrics").raw;
  EXPECT_GE(MetricValue(metrics, "kvault_prefix_store_bad_records_total")
                .value_or(0),
            1.0)
      << metrics;
  ASSERT_EQ(StopServer(server_.get()), "exit 0");
}

TEST_F(SlotFilesTest, RestoreIntoFullPoolSpillsIdleSlotThatContinuesLater) {
  // 384 cells, 3 slots: two long conversations cannot both stay resident
  // next to a third restore.
  StartServer({"-np", "3", "-c", "384", "--ctx-per-slot", "384",
               "--page-size", "16"});
  const std::string long_story = std::string(kStory) + kMore + kMore + kMore;
  const json a = Complete(long_story, 0, 200);
  ASSERT_GT(a["tokens_cached"].get<uint64_t>(), 230u);
  ASSERT_EQ(SlotAction(0, "save", "a.bin").status, 200);
  ASSERT_EQ(SlotAction(0, "erase", "").status, 200);
  // Slot 1 holds another conversation and then sits idle.
  const std::string other = "The cat sat on the mat. It was a sunny day.";
  const json b = Complete(other, 1, 140);
  // Slot 2 takes some pages so free space is fragmented between owners.
  const json c = Complete("Tom had a red ball.", 2, 24);

  Reply restored = SlotAction(0, "restore", "a.bin");
  ASSERT_EQ(restored.status, 200) << restored.raw;
  EXPECT_EQ(restored.body["n_restored"], a["tokens_cached"]);
  Reply metrics = client_->Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_GE(MetricValue(metrics.raw, "kvault_vault_evictions_total")
                .value_or(-1),
            1.0)
      << metrics.raw;

  // Slot 1's conversation continues exactly as an undisturbed one would.
  const std::string b_turn2 = other + b["content"].get<std::string>() + kMore;
  const json b2 = Complete(b_turn2, 1, 16);
  const json b2_cold = Complete(b_turn2, 2, 16, /*cache_prompt=*/false);
  EXPECT_EQ(b2["content"], b2_cold["content"]);
  EXPECT_GT(b2["timings"]["cache_n"].get<uint64_t>(), 0u)
      << "the spilled slot came back without recompute";
  // Slot 0 continues the restored conversation.
  const std::string a_turn2 = long_story + a["content"].get<std::string>();
  const json a2 = Complete(a_turn2, 0, 8);
  EXPECT_GT(a2["timings"]["cache_n"].get<uint64_t>(), 200u);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");
}

// Flips one byte in the middle of `path`.
void CorruptMiddle(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(size / 2);
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  f.seekp(size / 2);
  f.write(&byte, 1);
}

// Copies `from` to `to`, keeping only the first `keep` bytes.
void CopyPrefix(const std::string& from, const std::string& to,
                std::streamoff keep) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(to, std::ios::binary).write(bytes.data(), keep);
}

TEST_F(SlotFilesTest, EveryErrorPathHasItsCodeAndLeavesTheSlotAsItWas) {
  // A state file of another model (same shapes, F16 weights).
  const std::string f16 = SharedPath("models/stories260K.f16.gguf");
  if (!FileExists(f16)) GTEST_SKIP() << "missing " << f16;
  StartServer({"-np", "2"}, f16);
  Complete(kStory, 0);
  ASSERT_EQ(SlotAction(0, "save", "foreign.bin").status, 200);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");

  StartServer({"-np", "2"});
  const json before = Complete(kStory, 1);
  ASSERT_EQ(SlotAction(1, "save", "good.bin").status, 200);
  std::ifstream size_probe(dir_ + "/good.bin", std::ios::binary | std::ios::ate);
  const std::streamoff size = size_probe.tellg();
  CopyPrefix(dir_ + "/good.bin", dir_ + "/corrupt.bin", size);
  CorruptMiddle(dir_ + "/corrupt.bin");
  CopyPrefix(dir_ + "/good.bin", dir_ + "/truncated.bin", size - 100);

  struct Case {
    std::string action, filename;
    int slot, status;
    std::string type, reason;
  };
  const std::vector<Case> cases = {
      {"restore", "missing.bin", 1, 404, "not_found_error", "file_not_found"},
      {"restore", "corrupt.bin", 1, 422, "", "checksum_mismatch"},
      {"restore", "truncated.bin", 1, 422, "", "truncated"},
      {"restore", "foreign.bin", 1, 422, "", "model_mismatch"},
      {"restore", "../good.bin", 1, 400, "invalid_request_error", ""},
      {"save", "a/b.bin", 1, 400, "invalid_request_error", ""},
      {"restore", "good.bin", 7, 400, "invalid_request_error", ""},
      {"fly", "good.bin", 1, 400, "invalid_request_error", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.action + " " + c.filename + " slot " +
                 std::to_string(c.slot));
    Reply r = SlotAction(c.slot, c.action, c.filename);
    EXPECT_EQ(r.status, c.status) << r.raw;
    ASSERT_TRUE(r.body.contains("error")) << r.raw;
    EXPECT_EQ(r.body["error"]["code"], c.status);
    EXPECT_TRUE(r.body["error"]["message"].is_string());
    if (!c.type.empty()) {
      EXPECT_EQ(r.body["error"]["type"], c.type);
    }
    if (!c.reason.empty()) {
      EXPECT_EQ(r.body["reason"], c.reason) << r.raw;
    }
  }
  // The target slot still answers as before, from its cache.
  const json after = Complete(kStory, 1);
  EXPECT_EQ(after["content"], before["content"]);
  EXPECT_EQ(after["timings"]["prompt_n"], 1);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");
}

TEST_F(SlotFilesTest, SlotActionsWithoutSavePathAre501) {
  auto p = ServerProcess::Start({"-m", model_, "-np", "1", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  HttpClient client((*p)->port());
  Reply r = client.Post("/slots/0?action=save", {{"filename", "x.bin"}});
  EXPECT_EQ(r.status, 501) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "not_supported_error");
  // As in llama-server, every slot action needs --slot-save-path.
  EXPECT_EQ(client.Post("/slots/0?action=erase", json::object()).status, 501);
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

TEST_F(SlotFilesTest, AnotherArchitecturesFileIsA422ModelMismatch) {
  const std::string qwen2 = SharedPath("models/arch/qwen2.q8_0.gguf");
  const std::string gemma2 = SharedPath("models/arch/gemma2.q8_0.gguf");
  if (!FileExists(qwen2) || !FileExists(gemma2)) {
    GTEST_SKIP() << "missing " << qwen2 << " or " << gemma2;
  }
  StartServer({"-np", "1"}, qwen2);
  Complete("The little dog", 0, 4);
  ASSERT_EQ(SlotAction(0, "save", "qwen2.bin").status, 200);
  ASSERT_EQ(StopServer(server_.get()), "exit 0");

  StartServer({"-np", "1"}, gemma2);
  const json before = Complete("The little dog", 0, 4);
  Reply r = SlotAction(0, "restore", "qwen2.bin");
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body["reason"], "model_mismatch") << r.raw;
  // The slot keeps its own conversation.
  const json after = Complete("The little dog", 0, 4);
  EXPECT_EQ(after["content"], before["content"]);
}

}  // namespace
}  // namespace kvault::e2e
