#include "kv/redis_page_store.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/log.h"
#include "core/memory_file.h"

namespace kvault {
namespace {

// Weight of the newest fetch in the moving averages.
constexpr double kFetchWeight = 0.2;
// Keys remembered as present before the memory is cleared.
constexpr size_t kMaxKnownKeys = size_t{1} << 20;

// A record as fetched, read in place.
class RedisValueFile final : public RandomAccessFile {
 public:
  explicit RedisValueFile(RedisValue value) : value_(std::move(value)) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    const std::string_view b = value_.bytes();
    if (offset >= b.size()) return size_t{0};
    const size_t n = std::min<uint64_t>(out.size(), b.size() - offset);
    std::memcpy(out.data(), b.data() + offset, n);
    return n;
  }
  uint64_t size() const override { return value_.bytes().size(); }

 private:
  RedisValue value_;
};

}  // namespace

std::string RedisPageKeyPrefix(const PageKey& root) {
  return "kvault:v1:page:" + root.ToHex() + ":";
}

RedisPageStore::RedisPageStore(RedisPageStoreOptions options, Env* env)
    : options_(std::move(options)),
      env_(env),
      reader_(options_.endpoint, options_.read_timeouts, env),
      writer_conn_(options_.endpoint, options_.write_timeouts, env) {
  writer_ = std::thread([this] { WriterLoop(); });
}

RedisPageStore::~RedisPageStore() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_cv_.SignalAll();
  writer_.join();
}

std::string RedisPageStore::KeyOf(const PageKey& key) const {
  return options_.key_prefix + key.ToHex();
}

bool RedisPageStore::Contains(const PageKey& key) const {
  if (known_epoch_ != reader_.num_connects()) {
    // A new connection may be to a server that lost its data.
    known_.clear();
    known_epoch_ = reader_.num_connects();
  }
  if (known_.contains(key)) return true;
  StatusOr<bool> exists = reader_.Exists(KeyOf(key));
  if (!exists.ok()) {
    MutexLock lock(&mu_);
    ++stats_.errors;
    return false;
  }
  if (*exists && known_.size() < kMaxKnownKeys) known_.insert(key);
  return *exists;
}

Status RedisPageStore::Put(const PageKey& key, std::string record) {
  MutexLock lock(&mu_);
  if (queued_bytes_ + record.size() > options_.max_queued_bytes) {
    ++stats_.dropped_writes;
    return ResourceExhaustedError(
        "redis write queue full (" + std::to_string(queued_bytes_) +
        " bytes queued, limit " + std::to_string(options_.max_queued_bytes) +
        ")");
  }
  queued_bytes_ += record.size();
  queue_.emplace_back(KeyOf(key), std::move(record));
  work_cv_.Signal();
  return Status::Ok();
}

StatusOr<std::unique_ptr<RandomAccessFile>> RedisPageStore::Get(
    const PageKey& key) {
  return std::move(GetMany(std::span(&key, 1)).front());
}

std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>>
RedisPageStore::GetMany(std::span<const PageKey> keys) {
  std::vector<std::string> names;
  for (const PageKey& key : keys) names.push_back(KeyOf(key));
  const uint64_t start = env_->NowMicros();
  StatusOr<std::vector<StatusOr<std::optional<RedisValue>>>> values =
      reader_.GetMany(names);
  const uint64_t micros = env_->NowMicros() - start;
  std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>> files;
  MutexLock lock(&mu_);
  if (!values.ok()) {
    ++stats_.errors;
    stats_.misses += keys.size();
    for (size_t i = 0; i < keys.size(); ++i) files.push_back(values.status());
    return files;
  }
  uint64_t num_hits = 0;
  uint64_t num_bytes = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    StatusOr<std::optional<RedisValue>>& answer = (*values)[i];
    if (!answer.ok()) {  // e.g. a value of another type under the key
      ++stats_.errors;
      ++stats_.misses;
      files.push_back(answer.status());
      continue;
    }
    std::optional<RedisValue>& value = *answer;
    if (!value.has_value()) {
      ++stats_.misses;
      known_.erase(keys[i]);
      files.push_back(
          NotFoundError("page " + keys[i].ToHex() + " is not in redis"));
      continue;
    }
    ++num_hits;
    num_bytes += value->bytes().size();
    if (known_.size() < kMaxKnownKeys) known_.insert(keys[i]);
    files.push_back(std::unique_ptr<RandomAccessFile>(
        new RedisValueFile(std::move(*value))));
  }
  stats_.hits += num_hits;
  stats_.read_bytes += num_bytes;
  stats_.read_micros += micros;
  if (num_hits > 0) NoteFetch(num_bytes / num_hits, micros / num_hits);
  return files;
}

void RedisPageStore::NoteFetch(uint64_t num_bytes, uint64_t micros) const {
  const double w = fetch_bytes_avg_ == 0 ? 1.0 : kFetchWeight;
  fetch_seconds_avg_ += w * (micros / 1e6 - fetch_seconds_avg_);
  fetch_bytes_avg_ += w * (static_cast<double>(num_bytes) - fetch_bytes_avg_);
}

Status RedisPageStore::Remove(const PageKey& key) {
  known_.erase(key);
  Status s = reader_.Del(KeyOf(key));
  MutexLock lock(&mu_);
  if (s.ok()) {
    ++stats_.removals;
  } else {
    ++stats_.errors;
  }
  return s;
}

double RedisPageStore::ExpectedFetchSeconds(uint64_t num_bytes) const {
  if (reader_.backing_off()) return std::numeric_limits<double>::infinity();
  MutexLock lock(&mu_);
  if (fetch_bytes_avg_ <= 0) return 0;
  return fetch_seconds_avg_ * static_cast<double>(num_bytes) / fetch_bytes_avg_;
}

PageStoreStats RedisPageStore::Stats() const {
  MutexLock lock(&mu_);
  PageStoreStats s = stats_;
  s.queued_bytes = queued_bytes_;
  s.available = writer_available_;
  return s;
}

void RedisPageStore::Flush() {
  MutexLock lock(&mu_);
  while (!queue_.empty() || num_in_flight_ > 0) idle_cv_.Wait(&mu_);
}

void RedisPageStore::WriterLoop() {
  std::vector<Item> batch;
  for (;;) {
    uint64_t batch_bytes = 0;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stop_) work_cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped and drained
      batch.clear();
      while (!queue_.empty() && batch.size() < options_.max_batch &&
             (batch.empty() || batch_bytes + queue_.front().second.size() <=
                                   options_.max_batch_bytes)) {
        batch_bytes += queue_.front().second.size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      num_in_flight_ = batch.size();
    }
    Status sent = writer_conn_.SetMany(batch, /*only_new=*/true);
    MutexLock lock(&mu_);
    queued_bytes_ -= batch_bytes;
    num_in_flight_ = 0;
    const bool was_available = writer_available_;
    writer_available_ = sent.ok() || !writer_conn_.backing_off();
    if (sent.ok()) {
      stats_.puts += batch.size();
      stats_.put_bytes += batch_bytes;
      if (!was_available) KV_LOG(INFO) << "prefix store redis: writing again";
    } else {
      ++stats_.errors;
      stats_.dropped_writes += batch.size();
      // Logged when the store goes away, not for every batch meanwhile.
      if (was_available) {
        KV_LOG(WARNING) << "prefix store redis: records not written until "
                        << "it answers again (counted as dropped): " << sent;
      }
    }
    idle_cv_.SignalAll();
  }
}

}  // namespace kvault
