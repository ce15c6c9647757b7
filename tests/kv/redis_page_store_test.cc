// RedisPageStore against a real redis-server child process: records round
// trip, two instances share pages through it, and a store that is down,
// frozen, flapping or holding damaged, short or foreign values costs only
// hits — never a crash, a failed call or a wrong cell.
#include "kv/redis_page_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "kv/mem_page_store.h"
#include "kv/prefix_store.h"
#include "redis_test_server.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using redis_test::FlakyProxy;
using redis_test::RedisServer;
using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::MakeCache;
using state_test::SmallLayout;

constexpr SeqId kA(1);
constexpr SeqId kB(2);

TEST(ParseRedisUrlTest, AcceptsHostPortDbAndNamesWhatIsWrong) {
  auto e = ParseRedisUrl("redis://cache.local:6380/2");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "cache.local");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 2);
  auto d = ParseRedisUrl("redis://10.0.0.5");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0);
  EXPECT_EQ(d->ToString(), "redis://10.0.0.5:6379/0");
  const struct {
    const char* url;
    const char* says;
  } bad[] = {{"http://h:1", "expected redis://"},
             {"redis://h:0", "PORT"},
             {"redis://h:70000", "PORT"},
             {"redis://h:x", "PORT"},
             {"redis://h:1/-1", "DB"},
             {"redis://h:1/a", "DB"},
             {"redis://:1", "HOST"},
             {"redis://u:p@h:1", "HOST"}};
  for (const auto& b : bad) {
    auto r = ParseRedisUrl(b.url);
    ASSERT_FALSE(r.ok()) << b.url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.says), std::string::npos)
        << b.url << ": " << r.status();
  }
}

class RedisPageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = RedisServer::Start();
    ASSERT_NE(server_, nullptr)
        << "redis-server did not start (scripts/install-deps installs it)";
    cache_ = MakeCache(SmallLayout(), /*num_pages=*/32, /*page_size=*/4);
    AppendRandom(cache_.get(), kA, 10, /*seed=*/3);  // 2 full pages
    root_ = ChainRoot(kTestFingerprint, SmallLayout(), 4, 0);
    const auto cells = cache_->table().Cells(kA);
    wanted_.assign(cells.begin(), cells.end());
  }

  RedisPageStoreOptions Options(const std::string& url) {
    RedisPageStoreOptions o;
    o.endpoint = *ParseRedisUrl(url);
    o.key_prefix = RedisPageKeyPrefix(root_);
    return o;
  }
  // A prefix store of one instance: its own local tier, then redis at
  // `url`; `redis` (when given) receives the remote tier's address.
  std::unique_ptr<PrefixStore> Instance(const std::string& url,
                                        RedisPageStore** redis = nullptr,
                                        MemPageStore** local = nullptr,
                                        Env* env = Env::Default()) {
    std::vector<std::unique_ptr<PageStore>> tiers;
    auto mem = std::make_unique<MemPageStore>();
    if (local != nullptr) *local = mem.get();
    tiers.push_back(std::move(mem));
    auto remote = std::make_unique<RedisPageStore>(Options(url), env);
    if (redis != nullptr) *redis = remote.get();
    tiers.push_back(std::move(remote));
    return std::make_unique<PrefixStore>(std::move(tiers), kTestFingerprint,
                                         root_, SaveOptions{});
  }
  // Instance A publishes kA's full pages and waits until redis has them.
  void PublishFromInstanceA() {
    RedisPageStore* redis = nullptr;
    auto a = Instance(server_->url(), &redis);
    ASSERT_TRUE(a->Publish(*cache_, kA).ok());
    redis->Flush();
  }
  // The server's keys under this root, in hex page-key order.
  std::vector<std::string> ServerKeys() {
    std::string out =
        server_->Cli("--scan --pattern '" + RedisPageKeyPrefix(root_) + "*'");
    std::vector<std::string> keys;
    for (size_t at = 0; at < out.size();) {
      size_t end = out.find('\n', at);
      if (end == std::string::npos) end = out.size();
      if (end > at) keys.push_back(out.substr(at, end - at));
      at = end + 1;
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  bool HoldsWantedPrefix(SeqId seq, uint64_t n) {
    const auto cells = cache_->table().Cells(seq);
    return cells.size() == n &&
           std::equal(cells.begin(), cells.end(), wanted_.begin());
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<KvCache> cache_;
  PageKey root_;
  std::vector<TokenPos> wanted_;
};

TEST_F(RedisPageStoreTest, RecordsRoundTripUnderPrefixedKeys) {
  RedisPageStore store(Options(server_->url()), Env::Default());
  const PageKey key{1, 2};
  EXPECT_FALSE(store.Contains(key));
  ASSERT_TRUE(store.Put(key, "record bytes").ok());
  store.Flush();
  EXPECT_TRUE(store.Contains(key));
  auto file = store.Get(key);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string back(12, '\0');
  ASSERT_EQ(*(*file)->ReadAt(0, std::as_writable_bytes(std::span(back))), 12u);
  EXPECT_EQ(back, "record bytes");
  EXPECT_EQ(ServerKeys(),
            std::vector<std::string>{RedisPageKeyPrefix(root_) + key.ToHex()});
  EXPECT_TRUE(store.Get(PageKey{3, 4}).status().IsNotFound());
  ASSERT_TRUE(store.Remove(key).ok());
  EXPECT_FALSE(store.Contains(key));
  const PageStoreStats s = store.Stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_bytes, 12u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.read_bytes, 12u);
  EXPECT_EQ(s.removals, 1u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_TRUE(s.available);
}

// Instance A publishes; instance B, with an empty local tier, continues the
// same tokens from redis and keeps a local copy of what it fetched.
TEST_F(RedisPageStoreTest, AnotherInstanceContinuesFromTheSharedStore) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  EXPECT_EQ(ServerKeys().size(), 3u);  // 2 pages and the tail

  MemPageStore* b_local = nullptr;
  auto b = Instance(server_->url(), nullptr, &b_local);
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 10u);
  EXPECT_TRUE(HoldsWantedPrefix(kB, 10));
  const PrefixStoreStats s = b->Stats();
  ASSERT_EQ(s.tiers.size(), 2u);
  EXPECT_EQ(s.tiers[1].name, "redis");
  EXPECT_EQ(s.tiers[1].pages_loaded, 3u);
  EXPECT_EQ(s.tiers[1].store.hits, 3u);
  EXPECT_EQ(b_local->records.size(), 3u);  // copied into the nearer tier
  EXPECT_EQ(s.tiers[0].pages_published, 3u);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// A bit flip, a value of the wrong size and another model's record under
// this chain's key: each is refused, deleted from redis and counted.
TEST_F(RedisPageStoreTest, BadValuesAreRefusedDeletedAndCounted) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  const std::vector<PageKey> chain = PageKeyChain(root_, wanted_, 4);
  const std::string key1 = RedisPageKeyPrefix(root_) + chain[1].ToHex();
  RedisConnection cli(*ParseRedisUrl(server_->url()), {}, Env::Default());
  auto value = cli.Get(key1);
  ASSERT_TRUE(value.ok() && value->has_value());
  std::string flipped((*value)->bytes());
  flipped[flipped.size() / 2] ^= 0x04;  // one bit inside the K/V payload
  const std::pair<std::string, std::string> set[] = {{key1, flipped}};
  ASSERT_TRUE(cli.SetMany(set, /*only_new=*/false).ok());
  auto b = Instance(server_->url());
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_TRUE(HoldsWantedPrefix(kB, 4));
  EXPECT_EQ(b->Stats().tiers[1].bad_records, 1u);
  EXPECT_EQ(server_->Cli("EXISTS " + key1), "0");

  // A value of the wrong size.
  cache_->RemoveSequence(kB);
  const std::pair<std::string, std::string> short_value[] = {{key1, "short"}};
  ASSERT_TRUE(cli.SetMany(short_value, /*only_new=*/false).ok());
  auto c = Instance(server_->url());
  EXPECT_EQ(c->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_EQ(c->Stats().tiers[1].bad_records, 1u);

  // Another model's records under these keys.
  cache_->RemoveSequence(kB);
  auto other_cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(other_cache.get(), kA, 10, 3);
  auto foreign =
      std::make_unique<RedisPageStore>(Options(server_->url()), Env::Default());
  RedisPageStore* foreign_redis = foreign.get();
  ASSERT_TRUE(server_->Cli("FLUSHALL") == "OK");
  PrefixStore writer(SingleTier(std::move(foreign)), ModelFingerprint{9, 9},
                     root_, SaveOptions{});
  ASSERT_TRUE(writer.Publish(*other_cache, kA).ok());
  foreign_redis->Flush();
  auto d = Instance(server_->url());
  EXPECT_EQ(d->Extend(cache_.get(), kB, wanted_, 0, 10), 0u);
  EXPECT_EQ(d->Stats().tiers[1].bad_records, 1u);
  EXPECT_FALSE(cache_->table().Contains(kB));
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// Another model (another chain root) against the same server finds none
// of these pages: its keys have another prefix.
TEST_F(RedisPageStoreTest, TwoModelsOnOneServerNeverSeeEachOthersPages) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  const ModelFingerprint other_model{5, 6};
  const PageKey other_root = ChainRoot(other_model, SmallLayout(), 4, 0);
  RedisPageStoreOptions o = Options(server_->url());
  o.key_prefix = RedisPageKeyPrefix(other_root);
  auto redis = std::make_unique<RedisPageStore>(o, Env::Default());
  RedisPageStore* other_redis = redis.get();
  PrefixStore other(SingleTier(std::move(redis)), other_model, other_root,
                    SaveOptions{});
  EXPECT_FALSE(other.HasPageAt(wanted_, 0, 4));
  EXPECT_EQ(other.Extend(cache_.get(), kB, wanted_, 0, 10), 0u);
  EXPECT_EQ(other_redis->Stats().hits + other_redis->Stats().misses, 0u);
  EXPECT_EQ(other.Stats().tiers[0].bad_records, 0u);
}

// Nothing listens: every call returns at once with a miss or a counted
// drop, the fetch estimate says "do not wait", and the store comes back
// once a server answers after the back-off.
TEST_F(RedisPageStoreTest, ADownStoreCostsOnlyHitsAndIsUsedAgainLater) {
  FaultInjectingEnv env;  // its clock moves only when told
  const int port = server_->port();
  server_->Kill();
  RedisPageStore* redis = nullptr;
  auto store = Instance(server_->url(), &redis, nullptr, &env);
  EXPECT_TRUE(store->Publish(*cache_, kA).ok());  // queued; local tier too
  redis->Flush();
  EXPECT_FALSE(redis->Contains(PageKeyChain(root_, wanted_, 4)[0]));
  PageStoreStats s = redis->Stats();
  EXPECT_EQ(s.dropped_writes, 3u);
  EXPECT_GE(s.errors, 1u);
  EXPECT_FALSE(s.available);
  EXPECT_TRUE(std::isinf(redis->ExpectedFetchSeconds(1000)));
  EXPECT_TRUE(redis->Get(PageKey{1, 1}).status().code() ==
              StatusCode::kUnavailable);

  ASSERT_TRUE(server_->Restart());
  ASSERT_EQ(server_->port(), port);
  env.AdvanceMicros(60'000'000);  // past every back-off
  EXPECT_TRUE(store->Publish(*cache_, kA).ok());
  redis->Flush();
  EXPECT_EQ(ServerKeys().size(), 3u);
  EXPECT_TRUE(redis->Stats().available);
}

// A frozen server (SIGSTOP) makes commands time out; the caller gets a
// miss, not a hang or an error, and nothing wrong enters the cache.
TEST_F(RedisPageStoreTest, AFrozenStoreTimesOutIntoMisses) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  server_->Freeze(true);
  auto b = Instance(server_->url());
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 0u);
  EXPECT_FALSE(cache_->table().Contains(kB));
  EXPECT_GE(b->Stats().tiers[1].store.errors, 1u);
  server_->Freeze(false);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// Through a proxy that breaks every connection mid-reply: fetches fail
// (counted), the cache holds only whole verified pages, nothing crashes.
TEST_F(RedisPageStoreTest, AFlappingConnectionNeverYieldsAWrongCell) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  FlakyProxy proxy(server_->port());
  FaultInjectingEnv env;
  RedisPageStore* b_redis = nullptr;
  auto b = Instance(proxy.url(), &b_redis, nullptr, &env);
  for (uint64_t drop : {100u, 400u, 700u, 1000u, 2000u}) {
    proxy.drop_after_bytes = drop;
    env.AdvanceMicros(60'000'000);  // past the back-off: try again
    const uint64_t got = b->Extend(cache_.get(), kB, wanted_, 0, 10);
    EXPECT_TRUE(got == 0 || got == 4 || got == 8 || got == 10) << got;
    EXPECT_TRUE(got == 0 || HoldsWantedPrefix(kB, got));
    EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
    cache_->RemoveSequence(kB);
  }
  EXPECT_GE(proxy.num_dropped, 1u);
  EXPECT_GE(b_redis->Stats().errors, 1u);
  EXPECT_EQ(b->Stats().tiers[1].bad_records, 0u);  // broken, not bad
  proxy.drop_after_bytes = 0;
  env.AdvanceMicros(60'000'000);
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 10u);
  EXPECT_TRUE(HoldsWantedPrefix(kB, 10));
}

// With a measured prefill rate faster than the measured fetch rate, pages
// are recomputed rather than fetched (counted as skipped).
// The calls of `command` the server has answered since the last RESETSTAT.
int CommandCalls(RedisServer& server, const std::string& command) {
  const std::string info = server.Cli("info commandstats");
  const std::string tag = "cmdstat_" + command + ":calls=";
  const size_t at = info.find(tag);
  return at == std::string::npos ? 0
                                 : std::atoi(info.c_str() + at + tag.size());
}

TEST_F(RedisPageStoreTest, AChainIsAskedForOnceAndFetchedInOnePipeline) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  server_->Cli("config resetstat");
  auto b = Instance(server_->url());
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 10u);
  EXPECT_TRUE(HoldsWantedPrefix(kB, 10));
  // One EXISTS for the first page, both pages' GETs together; then the
  // tail's EXISTS and GET.
  EXPECT_EQ(CommandCalls(*server_, "exists"), 2);
  EXPECT_EQ(CommandCalls(*server_, "get"), 3);
  EXPECT_EQ(b->Stats().tiers[1].pages_loaded, 3u);
}

TEST_F(RedisPageStoreTest, AKeyOfAnotherTypeCostsOnlyItsOwnPage) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  const std::vector<std::string> keys = ServerKeys();
  ASSERT_EQ(keys.size(), 3u);
  const std::string page1 =
      RedisPageKeyPrefix(root_) + PageKeyChain(root_, wanted_, 4)[1].ToHex();
  server_->Cli("del " + page1);
  server_->Cli("rpush " + page1 + " not-a-record");
  RedisPageStore* redis = nullptr;
  auto b = Instance(server_->url(), &redis);
  // Page 0 and the WRONGTYPE error of page 1 come back in one pipeline.
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_TRUE(HoldsWantedPrefix(kB, 4));
  EXPECT_EQ(redis->Stats().hits, 1u);
  EXPECT_EQ(redis->Stats().errors, 1u);
  // The connection still answers afterwards.
  EXPECT_TRUE(redis->Contains(PageKeyChain(root_, wanted_, 4)[0]));
}

TEST_F(RedisPageStoreTest, FetchesOnlyWhenFasterThanRecomputing) {
  ASSERT_NO_FATAL_FAILURE(PublishFromInstanceA());
  auto b = Instance(server_->url());
  EXPECT_EQ(b->Extend(cache_.get(), kB, wanted_, 0, 4), 4u);  // measures
  cache_->RemoveSequence(kB);
  auto c = Instance(server_->url());
  c->NotePrefill(1'000'000'000, 1e-6);  // a prefill no fetch can beat
  // c has not fetched yet: no estimate, so it fetches once and measures
  // (the page lands in its disk tier too).
  EXPECT_EQ(c->Extend(cache_.get(), kB, wanted_, 0, 4), 4u);
  EXPECT_EQ(c->Stats().tiers[1].pages_loaded, 1u);
  cache_->RemoveSequence(kB);
  // Page 0 now comes from disk; page 1 only redis holds, and recomputing it
  // is expected to be faster.
  EXPECT_EQ(c->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_EQ(c->Stats().tiers[0].pages_loaded, 1u);
  EXPECT_EQ(c->Stats().tiers[1].fetches_skipped, 1u);
  EXPECT_EQ(c->Stats().tiers[1].pages_loaded, 1u);
}

}  // namespace
}  // namespace kvault
