// RedisConnection: one blocking connection to a Redis or Valkey server
// (libhiredis), for the remote prefix-store tier (redis_page_store.h).
//
// Every command has a deadline (connect and I/O timeouts), and a server that
// fails once is left alone for a back-off period that doubles up to a cap:
// while it is down, commands return Unavailable at once instead of stalling
// the caller. The next command after the back-off reconnects. The caller
// therefore never waits longer than one timeout per back-off period, whatever
// the server does (down, slow, dropping connections).
//
// Not thread-safe: one connection per thread.
#ifndef KVAULT_KV_REDIS_CONNECTION_H_
#define KVAULT_KV_REDIS_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/env.h"
#include "core/status_or.h"

struct redisContext;

namespace kvault {

// Where the store is: redis://HOST:PORT[/DB].
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  int db = 0;
  // Redis AUTH on connecting when `password` is set: "AUTH user password"
  // (an ACL user), or "AUTH password" when `user` is empty. Never logged.
  std::string user;
  std::string password;

  // Returns "redis://HOST:PORT/DB".
  std::string ToString() const;
};

// Parses redis://HOST[:PORT][/DB] (PORT defaults to 6379, DB to 0).
// InvalidArgument naming the part that is wrong otherwise.
StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url);

struct RedisTimeouts {
  uint64_t connect_micros = 200'000;
  uint64_t io_micros = 1'000'000;
  uint64_t min_backoff_micros = 250'000;
  uint64_t max_backoff_micros = 8'000'000;
};

// A string value as the server sent it. It keeps the client library's reply
// alive and exposes its bytes, so a large value is not copied again.
class RedisValue {
 public:
  // Takes ownership of `reply` (a string reply of the client library).
  explicit RedisValue(void* reply);
  // Returns the value's bytes (valid while this object or a copy lives).
  std::string_view bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> reply_;
  std::string_view bytes_;
};

class RedisConnection {
 public:
  // Connects lazily, on the first command. `env` (not owned) is the clock.
  RedisConnection(RedisEndpoint endpoint, RedisTimeouts timeouts, Env* env);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Returns the value of `key`, nullopt when absent.
  StatusOr<std::optional<RedisValue>> Get(std::string_view key);
  // Returns, per key of `keys`, its value (nullopt when absent) or the
  // server's error for it; sent as one pipeline, one round trip for all.
  // An error of the connection fails the whole call.
  StatusOr<std::vector<StatusOr<std::optional<RedisValue>>>> GetMany(
      std::span<const std::string> keys);
  // Returns whether `key` exists.
  StatusOr<bool> Exists(std::string_view key);
  // Returns the length of `key`'s value (0 when absent).
  StatusOr<uint64_t> StrLen(std::string_view key);
  // Returns bytes [begin, end) of `key`'s value (fewer past its end; empty
  // when absent): a large value read in bounded pieces.
  StatusOr<RedisValue> GetRange(std::string_view key, uint64_t begin,
                                uint64_t end);
  // Deletes `key` (OK when absent).
  Status Del(std::string_view key);
  // Sets each (key, value) pair, sent as one pipeline. With `only_new`
  // (SET NX) a key that exists keeps its value.
  Status SetMany(std::span<const std::pair<std::string, std::string>> pairs,
                 bool only_new);
  // Returns true while a failure's back-off runs (commands fail at once).
  bool backing_off() const;
  // Returns the number of successful connects (a reconnect counts anew).
  uint64_t num_connects() const { return num_connects_; }
  // Returns the number of commands or connects that failed.
  uint64_t num_errors() const { return num_errors_; }

 private:
  // Connects (and SELECTs the db) when not connected; Unavailable while
  // backing off or when the server cannot be reached.
  Status Ensure();
  // Sends `argv` and returns the reply (owned by the caller via FreeReply).
  StatusOr<void*> Command(std::span<const std::string_view> argv);
  // Reads a GET's reply (owned: freed here): its value, nullopt for nil.
  StatusOr<std::optional<RedisValue>> GetReply(void* reply);
  // Drops the connection and starts (or lengthens) the back-off; returns
  // Unavailable describing `what` failed.
  Status Fail(const std::string& what);

  RedisEndpoint endpoint_;
  RedisTimeouts timeouts_;
  Env* env_;
  redisContext* context_ = nullptr;
  uint64_t retry_at_micros_ = 0;  // no command before this time
  uint64_t backoff_micros_ = 0;   // 0: not backing off
  uint64_t num_connects_ = 0;
  uint64_t num_errors_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_KV_REDIS_CONNECTION_H_
