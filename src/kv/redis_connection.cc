#include "kv/redis_connection.h"

#include <hiredis/hiredis.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"

namespace kvault {
namespace {

timeval ToTimeval(uint64_t micros) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(micros / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(micros % 1'000'000);
  return tv;
}

// Parses a decimal in [min, max]; nullopt otherwise.
std::optional<int> ParseInt(std::string_view s, int min, int max) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min ||
      v > max) {
    return std::nullopt;
  }
  return v;
}

// Sends every byte of `iov` on socket `fd` (blocking, with the connection's
// send timeout), continuing after partial sends; IOError on a failure or
// timeout.
Status WriteAll(int fd, std::span<iovec> iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(
        std::min<size_t>(iov.size() - first, static_cast<size_t>(IOV_MAX)));
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = static_cast<size_t>(count);
    // MSG_NOSIGNAL: a peer that hung up is an error here, not a SIGPIPE.
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IOError(std::string("sendmsg: ") + std::strerror(errno));
    }
    auto left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::Ok();
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

ReplyPtr Own(void* reply) { return ReplyPtr(static_cast<redisReply*>(reply)); }

// Returns the error a reply carries, OK for any other reply.
Status ReplyError(const redisReply& r, std::string_view command) {
  if (r.type != REDIS_REPLY_ERROR) return Status::Ok();
  return UnavailableError(std::string(command) + " answered " +
                          std::string(r.str, r.len));
}

}  // namespace

RedisValue::RedisValue(void* reply)
    : reply_(reply, [](void* r) { freeReplyObject(r); }) {
  const redisReply* r = static_cast<const redisReply*>(reply);
  bytes_ = std::string_view(r->str, r->len);
}

std::string RedisEndpoint::ToString() const {
  return "redis://" + host + ":" + std::to_string(port) + "/" +
         std::to_string(db);
}

StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  const std::string shown = "kv store URL '" + std::string(url) + "'";
  if (!url.starts_with(kScheme)) {
    return InvalidArgumentError(shown + ": expected redis://HOST:PORT[/DB]");
  }
  std::string_view rest = url.substr(kScheme.size());
  RedisEndpoint e;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::optional<int> db = ParseInt(rest.substr(slash + 1), 0, 1 << 20);
    if (!db) return InvalidArgumentError(shown + ": DB must be a number >= 0");
    e.db = *db;
    rest = rest.substr(0, slash);
  }
  if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    std::optional<int> port = ParseInt(rest.substr(colon + 1), 1, 65535);
    if (!port) return InvalidArgumentError(shown + ": PORT must be 1..65535");
    e.port = *port;
    rest = rest.substr(0, colon);
  }
  if (rest.empty() || rest.find('@') != std::string_view::npos) {
    return InvalidArgumentError(shown + ": expected a HOST (no user:password)");
  }
  e.host = std::string(rest);
  return e;
}

RedisConnection::RedisConnection(RedisEndpoint endpoint, RedisTimeouts timeouts,
                                 Env* env)
    : endpoint_(std::move(endpoint)), timeouts_(timeouts), env_(env) {}

RedisConnection::~RedisConnection() {
  if (context_ != nullptr) redisFree(context_);
}

bool RedisConnection::backing_off() const {
  return backoff_micros_ != 0 && env_->NowMicros() < retry_at_micros_;
}

Status RedisConnection::Fail(const std::string& what) {
  ++num_errors_;
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  backoff_micros_ =
      backoff_micros_ == 0
          ? timeouts_.min_backoff_micros
          : std::min(2 * backoff_micros_, timeouts_.max_backoff_micros);
  retry_at_micros_ = env_->NowMicros() + backoff_micros_;
  return UnavailableError(endpoint_.ToString() + ": " + what);
}

Status RedisConnection::Ensure() {
  if (context_ != nullptr) return Status::Ok();
  if (backing_off()) {
    return UnavailableError(endpoint_.ToString() + " is backing off after " +
                            "a failure");
  }
  context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port,
                                     ToTimeval(timeouts_.connect_micros));
  if (context_ == nullptr) return Fail("connect: out of memory");
  if (context_->err != 0)
    return Fail(std::string("connect: ") + context_->errstr);
  if (redisSetTimeout(context_, ToTimeval(timeouts_.io_micros)) != REDIS_OK) {
    return Fail("setting the I/O timeout");
  }
  if (!endpoint_.password.empty()) {
    ReplyPtr r = Own(
        endpoint_.user.empty()
            ? redisCommand(context_, "AUTH %b", endpoint_.password.data(),
                           endpoint_.password.size())
            : redisCommand(context_, "AUTH %b %b", endpoint_.user.data(),
                           endpoint_.user.size(), endpoint_.password.data(),
                           endpoint_.password.size()));
    if (r == nullptr) return Fail(std::string("AUTH: ") + context_->errstr);
    if (Status s = ReplyError(*r, "AUTH"); !s.ok())
      return Fail(std::string(s.message()));
  }
  if (endpoint_.db != 0) {
    const std::string db = std::to_string(endpoint_.db);
    ReplyPtr r = Own(redisCommand(context_, "SELECT %s", db.c_str()));
    if (r == nullptr) return Fail(std::string("SELECT: ") + context_->errstr);
    if (Status s = ReplyError(*r, "SELECT"); !s.ok())
      return Fail(std::string(s.message()));
  }
  ++num_connects_;
  backoff_micros_ = 0;
  return Status::Ok();
}

StatusOr<void*> RedisConnection::Command(
    std::span<const std::string_view> argv) {
  KV_RETURN_IF_ERROR(Ensure());
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* reply = redisCommandArgv(context_, static_cast<int>(argv.size()),
                                 ptrs.data(), lens.data());
  if (reply == nullptr) {
    return Fail(std::string(argv[0]) + ": " + context_->errstr);
  }
  return reply;
}

StatusOr<std::optional<RedisValue>> RedisConnection::Get(std::string_view key) {
  const std::string_view argv[] = {"GET", key};
  KV_ASSIGN_OR_RETURN(void* raw, Command(argv));
  return GetReply(raw);
}

StatusOr<std::vector<StatusOr<std::optional<RedisValue>>>>
RedisConnection::GetMany(std::span<const std::string> keys) {
  KV_RETURN_IF_ERROR(Ensure());
  for (const std::string& key : keys) {
    const char* argv[] = {"GET", key.data()};
    const size_t lens[] = {3, key.size()};
    if (redisAppendCommandArgv(context_, 2, argv, lens) != REDIS_OK) {
      return Fail("queueing GET: out of memory");
    }
  }
  std::vector<StatusOr<std::optional<RedisValue>>> values;
  for (size_t i = 0; i < keys.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return Fail(std::string("GET: ") + context_->errstr);
    }
    values.push_back(GetReply(raw));
    // A malformed reply dropped the connection; an error reply leaves the
    // rest of the pipeline to be read.
    if (context_ == nullptr) return values.back().status();
  }
  return values;
}

StatusOr<std::optional<RedisValue>> RedisConnection::GetReply(void* raw) {
  ReplyPtr r = Own(raw);
  KV_RETURN_IF_ERROR(ReplyError(*r, "GET"));
  if (r->type == REDIS_REPLY_NIL) return std::optional<RedisValue>();
  if (r->type != REDIS_REPLY_STRING) {
    return Fail("GET answered reply type " + std::to_string(r->type));
  }
  return std::optional<RedisValue>(RedisValue(r.release()));
}

StatusOr<bool> RedisConnection::Exists(std::string_view key) {
  const std::string_view argv[] = {"EXISTS", key};
  KV_ASSIGN_OR_RETURN(void* raw, Command(argv));
  ReplyPtr r = Own(raw);
  KV_RETURN_IF_ERROR(ReplyError(*r, "EXISTS"));
  if (r->type != REDIS_REPLY_INTEGER) {
    return Fail("EXISTS answered reply type " + std::to_string(r->type));
  }
  return r->integer > 0;
}

StatusOr<uint64_t> RedisConnection::StrLen(std::string_view key) {
  const std::string_view argv[] = {"STRLEN", key};
  KV_ASSIGN_OR_RETURN(void* raw, Command(argv));
  ReplyPtr r = Own(raw);
  KV_RETURN_IF_ERROR(ReplyError(*r, "STRLEN"));
  if (r->type != REDIS_REPLY_INTEGER || r->integer < 0) {
    return Fail("STRLEN answered reply type " + std::to_string(r->type));
  }
  return static_cast<uint64_t>(r->integer);
}

StatusOr<RedisValue> RedisConnection::GetRange(std::string_view key,
                                               uint64_t begin, uint64_t end) {
  if (end <= begin) return InvalidArgumentError("GETRANGE of an empty range");
  const std::string first = std::to_string(begin);
  const std::string last = std::to_string(end - 1);  // GETRANGE is inclusive
  const std::string_view argv[] = {"GETRANGE", key, first, last};
  KV_ASSIGN_OR_RETURN(void* raw, Command(argv));
  ReplyPtr r = Own(raw);
  KV_RETURN_IF_ERROR(ReplyError(*r, "GETRANGE"));
  if (r->type != REDIS_REPLY_STRING) {
    return Fail("GETRANGE answered reply type " + std::to_string(r->type));
  }
  return RedisValue(r.release());
}

Status RedisConnection::Del(std::string_view key) {
  const std::string_view argv[] = {"DEL", key};
  KV_ASSIGN_OR_RETURN(void* raw, Command(argv));
  return ReplyError(*Own(raw), "DEL");
}

Status RedisConnection::SetMany(
    std::span<const std::pair<std::string, std::string>> pairs, bool only_new) {
  if (pairs.empty()) return Status::Ok();
  KV_RETURN_IF_ERROR(Ensure());
  // The commands go out from the callers' buffers in one sendmsg: the client
  // library would copy each value into its output buffer and move what is
  // left of that buffer after every partial write, which for values of
  // half a megabyte costs more than the transfer (2.4x here).
  std::vector<std::string> heads;
  heads.reserve(pairs.size());
  std::vector<iovec> iov;
  const std::string_view tail = only_new ? "\r\n$2\r\nNX\r\n" : "\r\n";
  for (const auto& [key, value] : pairs) {
    heads.push_back(std::string(only_new ? "*4" : "*3") + "\r\n$3\r\nSET\r\n$" +
                    std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
                    std::to_string(value.size()) + "\r\n");
    iov.push_back({heads.back().data(), heads.back().size()});
    iov.push_back({const_cast<char*>(value.data()), value.size()});
    iov.push_back({const_cast<char*>(tail.data()), tail.size()});
  }
  if (Status sent = WriteAll(context_->fd, iov); !sent.ok()) {
    return Fail("SET: " + std::string(sent.message()));
  }
  Status first_error;
  for (size_t i = 0; i < pairs.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      return Fail(std::string("SET: ") + context_->errstr);
    }
    Status s = ReplyError(*Own(raw), "SET");
    if (first_error.ok()) first_error = s;
  }
  return first_error;
}

}  // namespace kvault
