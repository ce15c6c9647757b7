// End to end: 8 concurrent streaming clients while another client keeps
// saving, restoring and erasing slots. No request may fail, and at
// temperature 0 every output must equal the serial run's.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

constexpr int kClients = 8;
constexpr int kPromptsPerClient = 4;   // distinct prompts, reference run
constexpr int kMaxRoundsPerClient = 400;
constexpr double kMaxSeconds = 30;

std::string PromptOf(int client, int round) {
  static const char* kOpenings[] = {
      "Once upon a time", "The little dog", "Lily and Ben",
      "One day, a bird", "There was a big tree", "Tom liked to",
      "The sun was hot", "Mom said"};
  return std::string(kOpenings[client % 8]) + " " + std::to_string(round);
}

json RequestOf(int client, int round, bool stream) {
  return {{"prompt", PromptOf(client, round)},
          {"n_predict", 24},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", stream}};
}

TEST(ConcurrencyE2eTest, StreamingClientsAndSlotActionsMatchSerialRun) {
  const std::string model = SharedPath("models/stories260K.gguf");
  if (!FileExists(model)) GTEST_SKIP() << "missing " << model;
  const std::string dir = MakeTempDir("conc");
  auto p = ServerProcess::Start({"-m", model, "-np", "4", "-c", "2048",
                                 "--slot-save-path", dir, "-t", "2",
                                 "--no-fsync"});
  ASSERT_TRUE(p.ok()) << p.status();
  HttpClient c((*p)->port());

  // The serial reference, one request at a time, no prefix reuse.
  std::map<std::string, std::string> expected;
  for (int i = 0; i < kClients; ++i) {
    for (int r = 0; r < kPromptsPerClient; ++r) {
      json req = RequestOf(i, r, false);
      req["cache_prompt"] = false;
      Reply reply = c.Post("/completion", req);
      ASSERT_EQ(reply.status, 200) << reply.raw;
      expected[PromptOf(i, r)] = reply.body["content"];
    }
  }

  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int>(kMaxSeconds * 1000));
  std::atomic<int> clients_left{kClients};
  std::atomic<int> failures{0};
  std::atomic<int> mismatches{0};
  std::atomic<int> num_requests{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < kMaxRoundsPerClient &&
                          std::chrono::steady_clock::now() < deadline;
           ++round) {
        const int r = round % kPromptsPerClient;
        ++num_requests;
        StreamReply s = c.Stream("/completion", RequestOf(i, r, true));
        if (s.status != 200 || s.events.empty() ||
            s.events.back().value("stop", false) != true) {
          ++failures;
          continue;
        }
        std::string text;
        for (const json& e : s.events) text += e.value("content", "");
        if (text != expected[PromptOf(i, r)]) ++mismatches;
      }
      --clients_left;
    });
  }
  // Slot actions race with the clients, in a bounded loop.
  int actions = 0;
  int action_failures = 0;
  for (int k = 0; k < 100000 && clients_left > 0; ++k) {
    const int slot = k % 4;
    const std::string file = "s" + std::to_string(slot) + ".bin";
    Reply r;
    switch (k % 3) {
      case 0:
        r = c.Post("/slots/" + std::to_string(slot) + "?action=save",
                   {{"filename", file}});
        // An empty slot cannot be saved; that is a clean 4xx, not a fault.
        if (r.status == 400 || r.status == 409) continue;
        break;
      case 1:
        r = c.Post("/slots/" + std::to_string(slot) + "?action=restore",
                   {{"filename", file}});
        if (r.status == 404) continue;  // not saved yet
        break;
      default:
        r = c.Post("/slots/" + std::to_string(slot) + "?action=erase",
                   json::object());
    }
    ++actions;
    if (r.status != 200) {
      ++action_failures;
      ADD_FAILURE() << "slot action " << k << ": " << r.raw;
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(actions, 0);
  std::printf("%d streamed requests, %d slot actions\n", num_requests.load(),
              actions);
  EXPECT_EQ(action_failures, 0);
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

}  // namespace
}  // namespace kvault::e2e
