#include "kv/slot_file_mirror.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/log.h"
#include "kv/slot_file.h"
#include "kv/state_file.h"
#include "kv/temp_files.h"

namespace kvault {
namespace {

// What a mirrored value's tag binds: its kind and its store key.
std::string MacLabel(const std::string& key) {
  return "kvault slot file v1 " + key;
}

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
                               std::shared_ptr<const RecordMac> mac,
                               RedisTimeouts timeouts)
    : model_(model),
      env_(env),
      mac_(std::move(mac)),
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
    const std::string key = KeyFor(model_, FileName(path));
    if (mac_ != nullptr) mac_->Seal(MacLabel(key), &*bytes);
    const std::pair<std::string, std::string> set[] = {
        {key, std::move(*bytes)}};
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

// Checks the fetched file at `tmp` as a restore would before reading any
// KV: the slot file's token header, then the state file's header, length
// and trailer (checks 1-7).
Status CheckFetched(Env* env, const std::string& tmp) {
  KV_ASSIGN_OR_RETURN(OpenedSlotFile opened, OpenSlotFile(env, tmp));
  return ReadStateHeader(*opened.state).status();
}

Status SlotFileMirror::FetchTo(const std::string& key,
                               const std::string& tmp) {
  MutexLock lock(&fetch_mu_);
  KV_ASSIGN_OR_RETURN(uint64_t len, fetch_conn_.StrLen(key));
  if (len == 0) return NotFoundError("not in the shared store");
  const uint64_t tag_bytes = mac_ != nullptr ? kMacTagBytes : 0;
  if (len > kMaxFileBytes + tag_bytes) {
    return CorruptionError(
        "the shared store's value is " + std::to_string(len) +
        " bytes, over the largest slot file mirrored (" +
        std::to_string(kMaxFileBytes) + ")");
  }
  if (len < tag_bytes) {
    return CorruptionError("the shared store's value of " +
                           std::to_string(len) +
                           " bytes has no room for its tag")
        .WithReason(kReasonTruncated);
  }
  KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out,
                      env_->NewWritableFile(tmp));
  std::optional<RecordMac::Stream> stream;
  if (mac_ != nullptr) stream.emplace(mac_->Begin(MacLabel(key)));
  std::string tag;
  for (uint64_t begin = 0; begin < len; begin += kFetchPieceBytes) {
    const uint64_t end = std::min(len, begin + kFetchPieceBytes);
    KV_ASSIGN_OR_RETURN(RedisValue piece,
                        fetch_conn_.GetRange(key, begin, end));
    if (piece.bytes().size() != end - begin) {
      return CorruptionError("the shared store's value changed while fetched")
          .WithReason(kReasonTruncated);
    }
    KV_RETURN_IF_ERROR(TakePiece(piece.bytes(), begin, len - tag_bytes,
                                 out.get(), stream ? &*stream : nullptr, &tag));
  }
  if (stream && !RecordMac::SameTag(stream->Final(),
                                    std::as_bytes(std::span(tag)))) {
    return RecordMac::TagMismatchError();
  }
  return out->Close();
}

Status SlotFileMirror::TakePiece(std::string_view piece, uint64_t begin,
                                 uint64_t data_bytes, WritableFile* out,
                                 RecordMac::Stream* stream, std::string* tag) {
  const size_t n_data = begin >= data_bytes
                            ? 0
                            : static_cast<size_t>(std::min<uint64_t>(
                                  piece.size(), data_bytes - begin));
  const auto data = std::as_bytes(std::span(piece.data(), n_data));
  if (stream != nullptr) stream->Update(data);
  tag->append(piece.substr(n_data));
  return out->Append(data);
}

Status SlotFileMirror::FetchIfMissing(const std::string& path) {
  if (env_->FileExists(path)) return Status::Ok();
  // Streamed aside, checked, then renamed: a restore never sees half a
  // file, and a value that is not a slot file never reaches the directory.
  const std::string tmp = TempPathFor(path);
  Status s = FetchTo(KeyFor(model_, FileName(path)), tmp);
  if (s.IsNotFound()) {
    s = NotFoundError(path + ": not on this instance nor in the shared store");
  } else if (s.ok()) {
    s = CheckFetched(env_, tmp).WithContext("fetched " + FileName(path));
    if (s.ok()) s = env_->RenameFile(tmp, path);
  }
  if (!s.ok()) (void)env_->RemoveFile(tmp);
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
