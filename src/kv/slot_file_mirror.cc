#include "kv/slot_file_mirror.h"

#include <optional>
#include <utility>

#include "core/log.h"
#include "kv/temp_files.h"

namespace kvault {
namespace {

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string SlotFileMirror::KeyFor(const ModelFingerprint& model,
                                   const std::string& name) {
  return "kvault:v1:slot:" + model.ToHex() + ":" + name;
}

SlotFileMirror::SlotFileMirror(RedisEndpoint endpoint,
                               const ModelFingerprint& model, Env* env,
                               RedisTimeouts timeouts)
    : model_(model),
      env_(env),
      writer_conn_(endpoint, timeouts, env),
      fetch_conn_(endpoint, timeouts, env) {
  writer_ = std::thread([this] { WriterLoop(); });
}

SlotFileMirror::~SlotFileMirror() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_cv_.SignalAll();
  writer_.join();
}

void SlotFileMirror::Upload(const std::string& path) {
  MutexLock lock(&mu_);
  if (queue_.size() >= kMaxQueued) {
    ++stats_.upload_failures;
    KV_LOG(WARNING) << "slot file mirror: " << path
                    << " not mirrored: upload queue full";
    return;
  }
  queue_.push_back(path);
  work_cv_.Signal();
}

bool SlotFileMirror::UploadNow(const std::string& path) {
  StatusOr<uint64_t> size = env_->GetFileSize(path);
  Status s = size.status();
  if (s.ok() && *size > kMaxFileBytes) {
    s = ResourceExhaustedError(std::to_string(*size) + " bytes, over the " +
                               std::to_string(kMaxFileBytes) + " mirrored");
  }
  StatusOr<std::string> bytes =
      s.ok() ? ReadFileToString(env_, path) : StatusOr<std::string>(s);
  if (bytes.ok()) {
    const std::pair<std::string, std::string> set[] = {
        {KeyFor(model_, FileName(path)), std::move(*bytes)}};
    s = writer_conn_.SetMany(set, /*only_new=*/false);
  } else {
    s = bytes.status();
  }
  if (!s.ok()) {
    KV_LOG(WARNING) << "slot file mirror: " << path << " not mirrored: " << s;
  }
  return s.ok();
}

void SlotFileMirror::WriterLoop() {
  for (;;) {
    std::string path;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stop_) work_cv_.Wait(&mu_);
      if (queue_.empty()) return;
      path = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const bool ok = UploadNow(path);
    MutexLock lock(&mu_);
    ++(ok ? stats_.uploads : stats_.upload_failures);
    busy_ = false;
    idle_cv_.SignalAll();
  }
}

void SlotFileMirror::Flush() {
  MutexLock lock(&mu_);
  while (!queue_.empty() || busy_) idle_cv_.Wait(&mu_);
}

Status SlotFileMirror::FetchIfMissing(const std::string& path) {
  if (env_->FileExists(path)) return Status::Ok();
  StatusOr<std::optional<RedisValue>> value = [&] {
    MutexLock lock(&fetch_mu_);
    return fetch_conn_.Get(KeyFor(model_, FileName(path)));
  }();
  Status s = value.status();
  if (s.ok() && !value->has_value()) {
    s = NotFoundError(path + ": not on this instance nor in the shared store");
  }
  if (s.ok()) {
    // Written aside and renamed, so a restore never sees half a file.
    const std::string tmp = TempPathFor(path);
    s = WriteStringToFile(env_, (*value)->bytes(), tmp, /*sync=*/false);
    if (s.ok()) s = env_->RenameFile(tmp, path);
    if (!s.ok()) (void)env_->RemoveFile(tmp);
  }
  MutexLock lock(&mu_);
  if (s.ok()) {
    ++stats_.fetches;
    KV_LOG(INFO) << "slot file mirror: fetched " << FileName(path)
                 << " from the shared store";
  } else if (s.IsNotFound()) {
    ++stats_.fetch_misses;
  } else {
    ++stats_.fetch_failures;
  }
  return s;
}

SlotFileMirrorStats SlotFileMirror::Stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kvault
