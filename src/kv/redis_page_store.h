// RedisPageStore: the prefix cache's remote tier, a PageStore on a Redis or
// Valkey server that several kvault instances share
// (--kv-store redis://HOST:PORT[/DB]; docs/distributed.md).
//
// Each record is one string value under `key_prefix` + the page key in hex;
// the prefix names the chain root (model fingerprint, KV layout, page size,
// RoPE settings), so instances of other models never read each other's
// records, and a record is checked on reading anyway (PrefixStore), so a
// damaged or foreign value is never used. The server's own eviction
// (maxmemory-policy allkeys-lru) keeps its budget.
//
// Writes leave the caller at once: Put queues the record (bounded; a full
// queue drops it, counted) and a writer thread sends queued records as one
// pipeline of SET NX commands. Reads (Contains, Get, Remove) run on the
// caller's thread over their own connection, each with a deadline; a store
// that fails is skipped for a back-off period (redis_connection.h), so a
// store that is down, slow or flapping costs at most one timeout per
// back-off and never fails a request: the caller sees a miss.
//
// Contains, Get and Remove are for one thread (the cache's owner); Put,
// Stats and Flush may be called from any thread.
#ifndef KVAULT_KV_REDIS_PAGE_STORE_H_
#define KVAULT_KV_REDIS_PAGE_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "core/mutex.h"
#include "kv/page_store.h"
#include "kv/redis_connection.h"

namespace kvault {

struct RedisPageStoreOptions {
  RedisEndpoint endpoint;
  // Reads run on the scheduler thread between forward steps: a store
  // that hangs may cost at most this, once per back-off period.
  RedisTimeouts read_timeouts = {.connect_micros = 100'000,
                                 .io_micros = 200'000};
  // The writer thread's (no request waits on it).
  RedisTimeouts write_timeouts;
  // Prepended to every key: "kvault:v1:page:<chain root hex>:".
  std::string key_prefix;
  // Bytes of records waiting to be written before Put drops new ones.
  uint64_t max_queued_bytes = uint64_t{256} << 20;
  // Records, and bytes, sent in one pipeline: small records gain from
  // pipelining; a large pipeline of large values loses to the client
  // library moving its output buffer after each partial socket write.
  size_t max_batch = 32;
  uint64_t max_batch_bytes = uint64_t{512} << 10;
};

// Returns the key prefix of records of chains under `root`:
// "kvault:v1:page:<root hex>:".
std::string RedisPageKeyPrefix(const PageKey& root);

class RedisPageStore final : public PageStore {
 public:
  // Starts the writer thread; connects on first use (a server that is down
  // now is tried again later). `env` (not owned) is the clock.
  RedisPageStore(RedisPageStoreOptions options, Env* env);
  // Sends what is queued (each send bounded by the timeouts), then stops.
  ~RedisPageStore() override;

  // Returns "redis".
  std::string_view name() const override { return "redis"; }
  // Returns true when the server holds `key` (one EXISTS, unless this
  // store wrote or read it since it last connected); false when down.
  bool Contains(const PageKey& key) const override;
  // Queues `record` for the writer; OK once queued. ResourceExhausted
  // (counted as a dropped write) when the queue is full.
  Status Put(const PageKey& key, std::string record) override;
  // Fetches the record of `key`; NotFound when absent, Unavailable when the
  // server cannot answer in time.
  StatusOr<std::unique_ptr<RandomAccessFile>> Get(const PageKey& key) override;
  // Fetches the records of `keys` in one pipeline (one round trip).
  std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>> GetMany(
      std::span<const PageKey> keys) override;
  // Deletes `key` on the server.
  Status Remove(const PageKey& key) override;
  // Returns the counters (num_records, used_bytes, budget_bytes: 0, the
  // server keeps those).
  PageStoreStats Stats() const override;
  // Returns `num_bytes` at the measured fetch rate (0 before any fetch;
  // +infinity while the server is backing off).
  double ExpectedFetchSeconds(uint64_t num_bytes) const override;
  // Blocks until every record queued so far has been sent (or dropped).
  void Flush();

 private:
  using Item = std::pair<std::string, std::string>;  // (key, record)

  // Returns the server key of `key`.
  std::string KeyOf(const PageKey& key) const;
  // The writer thread: sends batches until stopped and drained.
  void WriterLoop();
  // Adds a finished fetch of `num_bytes` taking `micros` to the estimate.
  void NoteFetch(uint64_t num_bytes, uint64_t micros) const REQUIRES(mu_);

  const RedisPageStoreOptions options_;
  Env* const env_;
  // The reader connection and what it learned: the caller's thread only.
  mutable RedisConnection reader_;
  mutable std::set<PageKey> known_;   // present on the server, as far as seen
  mutable uint64_t known_epoch_ = 0;  // reader_.num_connects() of known_

  mutable Mutex mu_;
  CondVar work_cv_;  // queue_ gained an item, or stop_
  CondVar idle_cv_;  // the writer finished a batch
  std::deque<Item> queue_ GUARDED_BY(mu_);
  uint64_t queued_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t num_in_flight_ GUARDED_BY(mu_) = 0;  // taken, not yet answered
  bool stop_ GUARDED_BY(mu_) = false;
  bool writer_available_ GUARDED_BY(mu_) = true;
  mutable PageStoreStats stats_ GUARDED_BY(mu_);
  // Fetch estimate: moving averages of a fetch's seconds and bytes (records
  // of one store have nearly one size, so their ratio is the rate).
  mutable double fetch_seconds_avg_ GUARDED_BY(mu_) = 0;
  mutable double fetch_bytes_avg_ GUARDED_BY(mu_) = 0;

  RedisConnection writer_conn_;  // the writer thread only
  std::thread writer_;
};

}  // namespace kvault

#endif  // KVAULT_KV_REDIS_PAGE_STORE_H_
