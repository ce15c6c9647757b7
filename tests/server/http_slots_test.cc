// POST /slots/{id}?action=save|restore|erase over HTTP: replies exactly as
// llama-server's, and every documented error code, type and reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;

class HttpSlotsTest : public testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadStoriesOrNull();
    if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
    ServerOptions o;
    o.slot_save_path = "auto";
    server_ = std::make_unique<TestServer>(std::move(model), o);
    ASSERT_TRUE(server_->ok());
  }
  TestServer& s() { return *server_; }

  // Runs a greedy completion in `slot`; returns the response.
  json Complete(int slot, const std::string& prompt, int n_predict) {
    auto [code, r] = s().Post("/completion", {{"prompt", prompt},
                                              {"n_predict", n_predict},
                                              {"temperature", 0},
                                              {"id_slot", slot}});
    EXPECT_EQ(code, 200) << r.dump();
    return r;
  }
  std::pair<int, json> Action(int slot, const std::string& action,
                              const json& body = json::object()) {
    return s().Post("/slots/" + std::to_string(slot) + "?action=" + action,
                    body);
  }
  std::string PathOf(const std::string& name) const {
    return (std::filesystem::path(server_->dir()) / name).string();
  }

  std::unique_ptr<TestServer> server_;
};

TEST_F(HttpSlotsTest, SaveRestoreEraseHappyPath) {
  json first = Complete(1, "Once upon a time", 8);
  auto [scode, saved] = Action(1, "save", {{"filename", "s1.bin"}});
  ASSERT_EQ(scode, 200) << saved.dump();
  EXPECT_EQ(saved["id_slot"], 1);
  EXPECT_EQ(saved["filename"], "s1.bin");
  EXPECT_EQ(saved["n_saved"], first["tokens_cached"]);
  EXPECT_EQ(saved["n_written"].get<uint64_t>(),
            std::filesystem::file_size(PathOf("s1.bin")));
  EXPECT_TRUE(saved["timings"]["save_ms"].is_number());
  EXPECT_EQ(saved.size(), 5u);

  auto [rcode, restored] = Action(0, "restore", {{"filename", "s1.bin"}});
  ASSERT_EQ(rcode, 200) << restored.dump();
  EXPECT_EQ(restored["id_slot"], 0);
  EXPECT_EQ(restored["filename"], "s1.bin");
  EXPECT_EQ(restored["n_restored"], saved["n_saved"]);
  EXPECT_EQ(restored["n_read"], saved["n_written"]);
  EXPECT_TRUE(restored["timings"]["restore_ms"].is_number());
  EXPECT_EQ(restored.size(), 5u);

  // Both slots continue identically from the same state.
  std::string cont = "Once upon a time" + first["content"].get<std::string>();
  json a = Complete(0, cont, 6);
  json b = Complete(1, cont, 6);
  EXPECT_EQ(a["content"], b["content"]);
  EXPECT_GT(a["timings"]["cache_n"].get<int>(), 0);

  auto [ecode, erased] = Action(0, "erase");
  ASSERT_EQ(ecode, 200) << erased.dump();
  EXPECT_EQ(erased["id_slot"], 0);
  EXPECT_GT(erased["n_erased"].get<int>(), 0);
  EXPECT_EQ(erased.size(), 2u);
}

TEST_F(HttpSlotsTest, RequestErrors) {
  Complete(0, "Once", 2);
  ExpectError(Action(2, "save", {{"filename", "x"}}), 400,
              "invalid_request_error", "slot_out_of_range");
  ExpectError(s().Post("/slots/abc?action=erase", json::object()), 400,
              "invalid_request_error", "invalid_slot_id");
  ExpectError(Action(0, "explode"), 400, "invalid_request_error",
              "invalid_action");
  ExpectError(Action(0, "save", {{"filename", "../x.bin"}}), 400,
              "invalid_request_error", "invalid_filename");
  ExpectError(Action(0, "save", {{"filename", "a/b"}}), 400,
              "invalid_request_error", "invalid_filename");
  ExpectError(Action(0, "save", json::object()), 400, "invalid_request_error",
              "missing_field");
  ExpectError(Action(0, "save", {{"filename", 3}}), 400,
              "invalid_request_error", "invalid_field");
  ExpectError(s().PostRaw("/slots/0?action=save", "{"), 400,
              "invalid_request_error", "malformed_json");
}

TEST_F(HttpSlotsTest, RestoreErrorsLeaveTheSlotAsItWas) {
  json before = Complete(0, "Once upon a time", 6);
  ASSERT_EQ(Action(0, "save", {{"filename", "good.bin"}}).first, 200);
  ExpectError(Action(0, "restore", {{"filename", "missing.bin"}}), 404,
              "not_found_error", "file_not_found");
  { std::ofstream(PathOf("garbage.bin")) << std::string(4096, 'g'); }
  ExpectError(Action(0, "restore", {{"filename", "garbage.bin"}}), 422,
              "invalid_request_error", "bad_magic");
  { std::ofstream(PathOf("tiny.bin")) << "KV"; }
  ExpectError(Action(0, "restore", {{"filename", "tiny.bin"}}), 422,
              "invalid_request_error", "truncated");
  const auto size = std::filesystem::file_size(PathOf("good.bin"));
  std::filesystem::copy_file(PathOf("good.bin"), PathOf("cut.bin"));
  std::filesystem::resize_file(PathOf("cut.bin"), size / 2);
  ExpectError(Action(0, "restore", {{"filename", "cut.bin"}}), 422,
              "invalid_request_error", "truncated");
  // Slot 0 still answers as before: the same continuation as a fresh run
  // in slot 1 from the same text.
  std::string cont = "Once upon a time" + before["content"].get<std::string>();
  json a = Complete(0, cont, 5);
  EXPECT_GT(a["timings"]["cache_n"].get<int>(), 0);
  json b = Complete(1, cont, 5);
  EXPECT_EQ(a["content"], b["content"]);
}

TEST_F(HttpSlotsTest, ForeignModelFileIs422ModelMismatch) {
  ServerOptions o;
  o.slot_save_path = server_->dir();  // the same directory
  TestServer other(MakeTinyModel(), o);
  ASSERT_TRUE(other.ok());
  auto [code, r] = other.Post("/completion", {{"prompt", {5, 6, 7, 8}},
                                              {"n_predict", 2},
                                              {"temperature", 0},
                                              {"id_slot", 0}});
  ASSERT_EQ(code, 200) << r.dump();
  ASSERT_EQ(
      other.Post("/slots/0?action=save", {{"filename", "tiny.state"}}).first,
      200);
  ExpectError(Action(0, "restore", {{"filename", "tiny.state"}}), 422,
              "invalid_request_error", "model_mismatch");
}

TEST(HttpSlotsNoRoomTest, RestoreThatCannotFitIs503NoRoom) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  EngineOptions eo = TestServer::DefaultEngineOptions();
  eo.n_ctx_total = 64;  // 4 pages of 16, and no spill tier
  eo.page_size = 16;
  ServerOptions o;
  o.slot_save_path = "auto";
  TestServer s(std::move(model), o, eo);
  ASSERT_TRUE(s.ok());
  auto run = [&s](int slot) {
    auto [code, r] =
        s.Post("/completion", {{"prompt", json(std::vector<int>(30, 300))},
                               {"n_predict", 4},
                               {"temperature", 0},
                               {"id_slot", slot}});
    EXPECT_EQ(code, 200) << r.dump();
    return r;
  };
  run(0);
  auto [scode, saved] = s.Post("/slots/0?action=save", {{"filename", "big"}});
  ASSERT_EQ(scode, 200) << saved.dump();
  ASSERT_EQ(s.Post("/slots/0?action=erase", json::object()).first, 200);
  run(1);  // slot 1 now holds the pool's other pages; nowhere to spill it
  ExpectError(s.Post("/slots/0?action=restore", {{"filename", "big"}}), 503,
              "unavailable_error", "no_room");
  // Slot 1 was not disturbed.
  auto [code, slots] = s.Get("/slots");
  ASSERT_EQ(code, 200);
  EXPECT_EQ(slots[1]["n_cached"], saved["n_saved"]);
}

TEST(HttpSlotsNoPathTest, WithoutSlotSavePathActionsAre501) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  TestServer s(std::move(model), ServerOptions{});
  ASSERT_TRUE(s.ok());
  for (const char* action : {"save", "restore", "erase"}) {
    SCOPED_TRACE(action);
    ExpectError(s.Post(std::string("/slots/0?action=") + action,
                       {{"filename", "x.bin"}}),
                501, "not_supported_error", "slot_save_path_unset");
  }
}

}  // namespace
}  // namespace kvault
