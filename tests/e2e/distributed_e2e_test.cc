// End to end, real processes on 127.0.0.1: redis-server, kvault instances
// sharing it (--kv-store), and nginx in front of them with the tested
// configuration in deploy/nginx/kvault.conf (consistent hashing on
// X-Conversation-Id). A conversation moves between instances without being
// recomputed, survives kill -9 from the disk tier, and keeps working when
// the store goes away or holds a damaged record; two models sharing the
// store never see each other's pages.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../kv/redis_test_server.h"
#include "http_client.h"
#include "kv/redis_connection.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;
using redis_test::RedisServer;

constexpr uint64_t kPageSize = 16;
// Tokens each turn generates. The last one is sampled, never evaluated: a
// turn leaves its prompt and kGenerated - 1 tokens in KV (as llama-server).
constexpr int64_t kGenerated = 16;

// About 1,500 tokens of varied TinyStories-like text.
std::string LongStory() {
  const char* names[] = {"Lily", "Tom", "Sue", "Max", "Ben", "Mia"};
  const char* things[] = {"a red ball",  "a big dog",   "a little cat",
                          "a shiny car", "a tall tree", "a blue bird"};
  std::string s = "Once upon a time, there was a little girl named Lily.";
  for (int i = 0; i < 60; ++i) {
    s += std::string(" ") + names[i % 6] + " went to the park and saw " +
         things[(i * 5) % 6] + ". It was " + (i % 2 ? "happy" : "sad") + ".";
  }
  return s;
}

// nginx running deploy/nginx/kvault.conf with the ports replaced; ready
// when its master announces the worker (after it opened its socket).
class Nginx {
 public:
  static std::unique_ptr<Nginx> Start(uint16_t listen,
                                      std::vector<uint16_t> upstreams) {
    auto n = std::unique_ptr<Nginx>(new Nginx);
    n->dir_ = MakeTempDir("nginx");
    std::ifstream in(std::string(KVAULT_SOURCE_DIR) +
                     "/deploy/nginx/kvault.conf");
    std::stringstream conf;
    conf << in.rdbuf();
    std::string text = conf.str();
    text = std::regex_replace(text, std::regex("127\\.0\\.0\\.1:8080"),
                              "127.0.0.1:" + std::to_string(listen));
    for (size_t i = 0; i < upstreams.size(); ++i) {
      text = std::regex_replace(
          text, std::regex("127\\.0\\.0\\.1:808" + std::to_string(i + 1)),
          "127.0.0.1:" + std::to_string(upstreams[i]));
    }
    std::ofstream(n->dir_ + "/kvault.conf") << text;
    const std::string d = n->dir_;
    std::ofstream(d + "/nginx.conf")
        << "daemon off;\nworker_processes 1;\npid " << d << "/nginx.pid;\n"
        << "error_log stderr notice;\nevents { worker_connections 256; }\n"
        << "http {\n  access_log off;\n  client_body_temp_path " << d
        << "/body;\n  proxy_temp_path " << d << "/proxy;\n"
        << "  fastcgi_temp_path " << d << "/fcgi;\n  uwsgi_temp_path " << d
        << "/uwsgi;\n  scgi_temp_path " << d << "/scgi;\n  include " << d
        << "/kvault.conf;\n}\n";
    int fds[2];
    if (pipe(fds) != 0) return nullptr;
    n->pid_ = fork();
    if (n->pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      const std::string conf_path = d + "/nginx.conf";
      execl("/usr/sbin/nginx", "nginx", "-p", d.c_str(), "-c",
            conf_path.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string log;
    char buf[1024];
    ssize_t got;
    while (log.find("start worker process") == std::string::npos &&
           (got = read(fds[0], buf, sizeof(buf))) > 0) {
      log.append(buf, got);
    }
    std::thread([fd = fds[0]] {
      char sink[1024];
      while (read(fd, sink, sizeof(sink)) > 0) {
      }
      close(fd);
    }).detach();
    if (log.find("start worker process") == std::string::npos) {
      ADD_FAILURE() << "nginx did not start:\n" << log;
      return nullptr;
    }
    n->port_ = listen;
    return n;
  }
  ~Nginx() {
    if (pid_ > 0) {
      kill(pid_, SIGQUIT);
      waitpid(pid_, nullptr, 0);
    }
  }
  uint16_t port() const { return port_; }

 private:
  Nginx() = default;
  std::string dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

class DistributedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = SharedPath("models/stories260K.gguf");
    if (!FileExists(model_)) GTEST_SKIP() << "missing " << model_;
    redis_ = RedisServer::Start();
    ASSERT_NE(redis_, nullptr)
        << "redis-server did not start (scripts/install-deps installs it)";
    key_file_ = WriteSecret("store.key", "the instances' shared store key");
  }

  // Writes `secret` (and a newline) to a new file named `name`; returns
  // its path.
  static std::string WriteSecret(const std::string& name,
                                 const std::string& secret) {
    const std::string path = MakeTempDir("secret") + "/" + name;
    std::ofstream(path) << secret << "\n";
    return path;
  }

  // Starts an instance with its own spill directory `spill` (made when
  // empty), the disk prefix tier and the shared redis tier.
  // `store_args` replace the store key flags (the shared key file).
  std::unique_ptr<ServerProcess> Instance(
      std::string* spill, uint16_t port = 0, const std::string& model = "",
      std::vector<std::string> store_args = {}) {
    if (spill->empty()) *spill = MakeTempDir("spill");
    const std::string slots = *spill + "-slots";
    std::filesystem::create_directories(slots);
    std::vector<std::string> args = {"-m",
                                     model.empty() ? model_ : model,
                                     "--slot-save-path",
                                     slots,
                                     "-np",
                                     "1",
                                     "-c",
                                     "2048",
                                     "--page-size",
                                     std::to_string(kPageSize),
                                     "-t",
                                     "1",
                                     "--no-fsync",
                                     "--spill-dir",
                                     *spill,
                                     "--spill-disk",
                                     "64M",
                                     "--prefix-disk",
                                     "64M",
                                     "--kv-store",
                                     redis_->url()};
    if (store_args.empty()) store_args = {"--kv-store-key-file", key_file_};
    args.insert(args.end(), store_args.begin(), store_args.end());
    auto p = ServerProcess::Start(args, 120, port);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }

  // A greedy completion through `port` for conversation `conv`; sets
  // `*upstream` to the instance nginx chose (when asked).
  static json Complete(uint16_t port, const std::string& prompt,
                       bool cache_prompt = true,
                       const std::string& conv = "conversation-1",
                       std::string* upstream = nullptr) {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(300, 0);
    const json body = {{"prompt", prompt},
                       {"n_predict", kGenerated},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"cache_prompt", cache_prompt}};
    auto res = cli.Post("/completion", {{"X-Conversation-Id", conv}},
                        body.dump(), "application/json");
    EXPECT_TRUE(res) << "no reply through port " << port;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    if (upstream != nullptr) {
      *upstream = res->get_header_value("X-Kvault-Upstream");
    }
    return json::parse(res->body, nullptr, false);
  }

  static std::string Metrics(const ServerProcess& p) {
    return HttpClient(p.port()).Get("/metrics").raw;
  }

  // The value of `series{tier="TIER"}` in `metrics`.
  static double TierValue(const std::string& metrics, const std::string& name,
                          const std::string& tier) {
    return MetricValue(metrics, name + "{tier=\"" + tier + "\"}").value_or(-1);
  }

  std::string model_;
  std::unique_ptr<RedisServer> redis_;
  std::string key_file_;
};

// The first Done-when of issue 23: A -> B through nginx, kill -9 and
// restart from disk, redis stopped midway.
TEST_F(DistributedTest, AConversationMovesBetweenInstancesWithoutRecompute) {
  std::string spill_a, spill_b;
  std::unique_ptr<ServerProcess> a = Instance(&spill_a);
  std::unique_ptr<ServerProcess> b = Instance(&spill_b);
  ASSERT_TRUE(a && b);
  const uint16_t front = static_cast<uint16_t>(redis_test::FreePort());
  std::unique_ptr<Nginx> nginx = Nginx::Start(front, {a->port(), b->port()});
  ASSERT_NE(nginx, nullptr);

  const std::string story = LongStory();
  std::string first_upstream;
  const json first =
      Complete(front, story, true, "conversation-1", &first_upstream);
  const uint64_t n1 = first["tokens_evaluated"];
  ASSERT_GE(n1, 1400u);
  ASSERT_FALSE(first_upstream.empty());
  // The instance that served it leaves (SIGTERM sends what it queued for
  // redis); the conversation's next turn goes to the other one.
  const bool a_served =
      first_upstream == "127.0.0.1:" + std::to_string(a->port());
  std::unique_ptr<ServerProcess>& gone = a_served ? a : b;
  std::unique_ptr<ServerProcess>& other = a_served ? b : a;
  std::string* other_spill = a_served ? &spill_b : &spill_a;
  EXPECT_EQ(StopServer(gone.get()), "exit 0");
  gone.reset();

  const std::string turn2 =
      story + first["content"].get<std::string>() + " The end of day one.";
  const json second = Complete(front, turn2);
  const int64_t n2 = second["tokens_evaluated"];
  // The tokens no instance has evaluated yet: all but turn 1's KV.
  const int64_t new_tokens = n2 - (static_cast<int64_t>(n1) + kGenerated - 1);
  EXPECT_LE(second["timings"]["prompt_n"].get<int64_t>(), new_tokens)
      << "cache_n " << second["timings"]["cache_n"];
  std::cout << "turn 1: " << n1 << " tokens via " << first_upstream
            << "; turn 2 on the other instance: " << n2 << " tokens, cache_n "
            << second["timings"]["cache_n"] << ", prompt_n "
            << second["timings"]["prompt_n"] << " (new tokens " << new_tokens
            << "), prompt_ms " << second["timings"]["prompt_ms"] << "\n";
  std::string metrics = Metrics(*other);
  EXPECT_GE(
      TierValue(metrics, "kvault_prefix_store_pages_loaded_total", "redis"),
      static_cast<double>(n1 / kPageSize - 1))
      << metrics;
  // What a cache-aware router asks: how much of this prompt do you hold?
  const std::string turn2_next = turn2 + second["content"].get<std::string>();
  Reply held = HttpClient(other->port())
                   .Post("/kv/lookup", json{{"prompt", turn2_next}});
  ASSERT_EQ(held.status, 200) << held.raw;
  std::cout << "lookup: " << held.raw << "\n";
  EXPECT_EQ(held.body["pool"]["id_slot"], 0);
  EXPECT_GE(held.body["pool"]["n_tokens"].get<int64_t>(), n2 + 15 - 1);
  ASSERT_EQ(held.body["store"].size(), 2u);
  EXPECT_EQ(held.body["store"][0]["tier"], "disk");
  EXPECT_EQ(held.body["store"][0]["n_tokens"].get<int64_t>(),
            (n2 + 15) / 16 * 16);
  EXPECT_EQ(held.body["n_tokens_held"], held.body["pool"]["n_tokens"]);
  const json cold2 = Complete(other->port(), turn2, /*cache_prompt=*/false);
  EXPECT_EQ(second["content"], cold2["content"]);

  // kill -9 and restart on the same port: the disk tier continues it.
  const uint16_t port = other->port();
  kill(other->pid(), SIGKILL);
  other.reset();
  other = Instance(other_spill, port);
  ASSERT_TRUE(other);
  const std::string turn3 =
      turn2 + second["content"].get<std::string>() + " Day two began.";
  const json third = Complete(front, turn3);
  const int64_t n3 = third["tokens_evaluated"];
  EXPECT_LE(third["timings"]["prompt_n"].get<int64_t>(),
            n3 - (n2 + kGenerated - 1));
  std::cout << "turn 3 after kill -9: " << n3 << " tokens, cache_n "
            << third["timings"]["cache_n"] << ", prompt_n "
            << third["timings"]["prompt_n"] << "\n";
  metrics = Metrics(*other);
  EXPECT_GE(
      TierValue(metrics, "kvault_prefix_store_pages_loaded_total", "disk"),
      static_cast<double>(n2 / kPageSize - 1))
      << metrics;
  EXPECT_EQ(third["content"], Complete(other->port(), turn3, false)["content"]);

  // The store goes away: every request still succeeds, the same output.
  redis_->Kill();
  const std::string turn4 =
      turn3 + third["content"].get<std::string>() + " Then night fell.";
  const json fourth = Complete(front, turn4);
  EXPECT_EQ(fourth["content"],
            Complete(other->port(), turn4, false)["content"]);
  const json fresh =
      Complete(front, "A new story about a frog.", true, "conversation-2");
  EXPECT_FALSE(fresh["content"].get<std::string>().empty());
  metrics = Metrics(*other);
  EXPECT_GE(TierValue(metrics, "kvault_prefix_store_errors_total", "redis"),
            1.0)
      << metrics;
  EXPECT_EQ(StopServer(other.get()), "exit 0");
}

// A bit flipped in a record in redis is detected, counted, deleted, and
// the request recomputes from there with the same output.
TEST_F(DistributedTest, ACorruptRecordInRedisIsNeverUsed) {
  std::string spill_a, spill_b;
  std::unique_ptr<ServerProcess> a = Instance(&spill_a);
  ASSERT_TRUE(a);
  const std::string story = LongStory();
  const json first = Complete(a->port(), story);
  EXPECT_EQ(StopServer(a.get()), "exit 0");  // its writes reach redis
  const std::string keys = redis_->Cli("--scan --pattern 'kvault:v1:page:*'");
  ASSERT_FALSE(keys.empty());
  // Flip one bit in the middle of every record.
  RedisConnection cli(*ParseRedisUrl(redis_->url()), {}, Env::Default());
  std::istringstream lines(keys);
  int damaged = 0;
  for (std::string key; std::getline(lines, key);) {
    auto value = cli.Get(key);
    ASSERT_TRUE(value.ok() && value->has_value());
    std::string v((*value)->bytes());
    v[v.size() / 2] ^= 0x10;
    const std::pair<std::string, std::string> set[] = {{key, v}};
    ASSERT_TRUE(cli.SetMany(set, /*only_new=*/false).ok());
    ++damaged;
  }
  ASSERT_GT(damaged, 50);
  std::unique_ptr<ServerProcess> b = Instance(&spill_b);
  ASSERT_TRUE(b);
  const std::string turn2 = story + first["content"].get<std::string>();
  const json second = Complete(b->port(), turn2);
  EXPECT_EQ(second["timings"]["cache_n"], 0);
  EXPECT_EQ(second["content"], Complete(b->port(), turn2, false)["content"]);
  HttpClient client(b->port());
  Reply ids = client.Get("/kv/lookup?tokens=1,2,3");
  ASSERT_EQ(ids.status, 200) << ids.raw;
  EXPECT_EQ(ids.body["n_tokens"], 3);
  Reply bad = client.Get("/kv/lookup?tokens=1,x");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("item 1 ('x')"), std::string::npos) << bad.raw;
  EXPECT_EQ(client.Get("/kv/lookup").status, 400);
  const std::string metrics = Metrics(*b);
  EXPECT_EQ(
      TierValue(metrics, "kvault_prefix_store_bad_records_total", "redis"), 1.0)
      << metrics;
  EXPECT_EQ(
      TierValue(metrics, "kvault_prefix_store_pages_loaded_total", "redis"),
      0.0);
  EXPECT_EQ(StopServer(b.get()), "exit 0");
}

// Regression (issue 40): anyone who could write to Redis could change
// outputs (a record with recomputed checksums was loaded). Records and a
// slot file written by an instance holding another key (complete, valid,
// checksums right) are refused and counted; the output is what
// recomputing gives, and the slot file never reaches the directory.
TEST_F(DistributedTest, RecordsAndSlotFilesSealedWithAnotherKeyAreRefused) {
  std::string spill_f, spill_a;
  const std::string forger_key = WriteSecret("forger.key", "not the key!!!!!");
  std::unique_ptr<ServerProcess> forger = Instance(
      &spill_f, 0, "", {"--kv-store-key-file", forger_key});
  ASSERT_TRUE(forger);
  const std::string story = LongStory();
  const json first = Complete(forger->port(), story);
  Reply saved = HttpClient(forger->port())
                    .Post("/slots/0?action=save", json{{"filename", "f.bin"}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(StopServer(forger.get()), "exit 0");  // its writes reach redis
  ASSERT_FALSE(redis_->Cli("--scan --pattern 'kvault:v1:page:*'").empty());

  std::unique_ptr<ServerProcess> a = Instance(&spill_a);
  ASSERT_TRUE(a);
  const std::string turn2 = story + first["content"].get<std::string>();
  const json second = Complete(a->port(), turn2);
  EXPECT_EQ(second["timings"]["cache_n"], 0);
  EXPECT_EQ(second["content"], Complete(a->port(), turn2, false)["content"]);
  Reply restored = HttpClient(a->port())
                       .Post("/slots/0?action=restore",
                             json{{"filename", "f.bin"}});
  EXPECT_EQ(restored.status, 422) << restored.raw;
  EXPECT_NE(restored.raw.find("tag does not match"), std::string::npos)
      << restored.raw;
  EXPECT_FALSE(FileExists(spill_a + "-slots/f.bin"));
  const std::string metrics = Metrics(*a);
  EXPECT_GE(
      TierValue(metrics, "kvault_prefix_store_bad_records_total", "redis"), 1.0)
      << metrics;
  EXPECT_EQ(
      TierValue(metrics, "kvault_prefix_store_pages_loaded_total", "redis"),
      0.0);
  EXPECT_EQ(StopServer(a.get()), "exit 0");
}

// A store that needs AUTH (an ACL user; the default user off): an instance
// with the user's password writes its pages; one without a key, or with
// no password, is refused at start or by the store.
TEST_F(DistributedTest, AnAclUserAuthenticatesAndAKeylessStoreIsRefused) {
  const std::string password = "s3cret-pass-for-kvault";
  redis_->Cli("ACL SETUSER kvault on '>" + password + "' '~*' '&*' '+@all'");
  redis_->Cli("ACL SETUSER default off");
  const std::string auth =
      "--user kvault --pass " + password + " --no-auth-warning ";
  const std::string password_file = WriteSecret("redis.pass", password);
  std::string spill_a, spill_b;
  std::unique_ptr<ServerProcess> a =
      Instance(&spill_a, 0, "",
               {"--kv-store-key-file", key_file_, "--kv-store-user", "kvault",
                "--kv-store-password-file", password_file});
  ASSERT_TRUE(a);
  Complete(a->port(), LongStory());
  EXPECT_EQ(StopServer(a.get()), "exit 0");
  EXPECT_FALSE(redis_->Cli(auth + "--scan --pattern 'kvault:v1:page:*'").empty());
  // Without the store key the server does not start (it says why).
  auto keyless = ServerProcess::Start(
      {"-m", model_, "--kv-store", redis_->url(), "-t", "1"}, 60);
  ASSERT_FALSE(keyless.ok());
  EXPECT_NE(keyless.status().message().find("--kv-store-key-file"),
            std::string::npos)
      << keyless.status();
}

// Two models on one store: the second finds none of the first's pages (it
// never even reads one), and each keeps its pages under its own prefix.
TEST_F(DistributedTest, TwoModelsSharingTheStoreNeverSeeEachOthersPages) {
  const std::string other_model = SharedPath("models/stories260K.q8_0.gguf");
  if (!FileExists(other_model)) GTEST_SKIP() << "missing " << other_model;
  std::string spill_a, spill_b;
  std::unique_ptr<ServerProcess> a = Instance(&spill_a);
  ASSERT_TRUE(a);
  const std::string story = LongStory();
  Complete(a->port(), story);
  EXPECT_EQ(StopServer(a.get()), "exit 0");
  std::unique_ptr<ServerProcess> b = Instance(&spill_b, 0, other_model);
  ASSERT_TRUE(b);
  const json second = Complete(b->port(), story + " More.");
  EXPECT_EQ(second["timings"]["cache_n"], 0);
  const std::string metrics = Metrics(*b);
  EXPECT_EQ(TierValue(metrics, "kvault_prefix_store_hits_total", "redis"), 0);
  EXPECT_EQ(
      TierValue(metrics, "kvault_prefix_store_bad_records_total", "redis"), 0);
  EXPECT_EQ(StopServer(b.get()), "exit 0");
  // Each model's pages sit under its own chain root.
  std::istringstream lines(redis_->Cli("--scan --pattern 'kvault:v1:page:*'"));
  std::set<std::string> roots;
  for (std::string key; std::getline(lines, key);) {
    roots.insert(key.substr(0, key.rfind(':')));
  }
  EXPECT_EQ(roots.size(), 2u);
}

// A slot saved by name on one instance restores on another, which has no
// local copy: the file comes from the shared store and passes every check.
TEST_F(DistributedTest, ASlotSavedByNameOnOneInstanceRestoresOnAnother) {
  std::string spill_a, spill_b;
  std::unique_ptr<ServerProcess> a = Instance(&spill_a);
  ASSERT_TRUE(a);
  const std::string story = LongStory();
  const json first = Complete(a->port(), story);
  Reply saved = HttpClient(a->port()).Post("/slots/0?action=save",
                                           json{{"filename", "conv.bin"}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(StopServer(a.get()), "exit 0");  // uploads what it queued

  std::unique_ptr<ServerProcess> b = Instance(&spill_b);
  ASSERT_TRUE(b);
  HttpClient client(b->port());
  Reply restored =
      client.Post("/slots/0?action=restore", json{{"filename", "conv.bin"}});
  ASSERT_EQ(restored.status, 200) << restored.raw;
  EXPECT_EQ(restored.body["n_restored"], saved.body["n_saved"]);
  EXPECT_TRUE(FileExists(spill_b + "-slots/conv.bin"));
  const std::string turn2 = story + first["content"].get<std::string>();
  const json second = Complete(b->port(), turn2);
  EXPECT_GE(second["timings"]["cache_n"].get<uint64_t>(),
            saved.body["n_saved"].get<uint64_t>() - 1);
  EXPECT_EQ(second["content"], Complete(b->port(), turn2, false)["content"]);
  EXPECT_EQ(client
                .Post("/slots/0?action=restore",
                      json{{"filename", "never-saved.bin"}})
                .status,
            404);
  const std::string metrics = Metrics(*b);
  EXPECT_EQ(MetricValue(metrics,
                        "kvault_slot_file_mirror_fetches_total{result=\"ok\"}"),
            1.0)
      << metrics;
  EXPECT_EQ(StopServer(b.get()), "exit 0");
}

}  // namespace
}  // namespace kvault::e2e
