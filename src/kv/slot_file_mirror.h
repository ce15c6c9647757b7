// SlotFileMirror: slot files saved by name (POST /slots/N?action=save,
// under --slot-save-path) mirrored to the shared Redis/Valkey store of
// --kv-store, so that a restore by the same name on another instance of the
// same model finds the file there when it has no local copy.
//
// The local file stays the primary copy: a save succeeds once it is on the
// local disk, and the mirror is written afterwards by a writer thread that
// reads the saved file (queue bounded; a dropped or failed upload is
// counted and logged, never an error of the save). A restore whose file is
// missing locally streams the value (in bounded pieces, at most
// kMaxFileBytes) into a temporary file, checks it as a slot file (token
// header, state header and trailer) and only then renames it into the save
// directory, so a value that is not a slot file never lands there; the
// restore then runs every state-file check as for any local file.
//
// Keys: "kvault:v1:slot:<model fingerprint hex>:<file name>": instances of
// other models never see the name. Thread-safe.
#ifndef KVAULT_KV_SLOT_FILE_MIRROR_H_
#define KVAULT_KV_SLOT_FILE_MIRROR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "core/env.h"
#include "core/mutex.h"
#include "core/record_mac.h"
#include "kv/model_fingerprint.h"
#include "kv/redis_connection.h"

namespace kvault {

struct SlotFileMirrorStats {
  uint64_t uploads = 0;          // files written to the store
  uint64_t upload_failures = 0;  // files not written (down, queue full)
  uint64_t fetches = 0;          // files fetched for a restore
  uint64_t fetch_misses = 0;     // restores of names the store lacks
  uint64_t fetch_failures = 0;   // fetches that failed (down, local I/O)
};

class SlotFileMirror {
 public:
  // Files at most this large are mirrored (Redis's value limit is 512 MiB).
  static constexpr uint64_t kMaxFileBytes = uint64_t{500} << 20;
  // A fetch reads a value in pieces of this many bytes.
  static constexpr uint64_t kFetchPieceBytes = uint64_t{8} << 20;
  // Uploads waiting before new ones are dropped.
  static constexpr size_t kMaxQueued = 16;

  // Starts the writer thread; connects on first use. `env` (not owned)
  // reads and writes the files and is the clock. With `mac` (may be null)
  // each value is the file followed by its HMAC tag (label: "kvault slot
  // file v1 " and the store key, so a value never opens under another
  // name), and a fetched value without a right tag is refused
  // (checksum_mismatch) before anything reaches the directory.
  SlotFileMirror(RedisEndpoint endpoint, const ModelFingerprint& model,
                 Env* env, std::shared_ptr<const RecordMac> mac = nullptr,
                 RedisTimeouts timeouts = {});
  // Uploads what is queued, then stops.
  ~SlotFileMirror();
  SlotFileMirror(const SlotFileMirror&) = delete;
  SlotFileMirror& operator=(const SlotFileMirror&) = delete;

  // Queues the file just saved at `path` for upload under its file name.
  void Upload(const std::string& path);
  // When `path` does not exist, fetches its file name from the store into
  // `path`. OK when the file exists afterwards; NotFound when neither has
  // it; Unavailable when the store cannot answer; ResourceExhausted for a
  // value over kMaxFileBytes; the slot-file check's error for a value that
  // is not a slot file (nothing is left in the directory); the local
  // write's error.
  Status FetchIfMissing(const std::string& path);
  // Blocks until every queued upload has been tried.
  void Flush();
  // Returns the counters.
  SlotFileMirrorStats Stats() const;

  // Returns the store key of file name `name` for `model`.
  static std::string KeyFor(const ModelFingerprint& model,
                            const std::string& name);

 private:
  void WriterLoop();
  // Reads `path` and SETs it; false (logged) when it cannot.
  bool UploadNow(const std::string& path);
  // Streams `key`'s value into the new file `tmp` (see FetchIfMissing).
  Status FetchTo(const std::string& key, const std::string& tmp)
      EXCLUDES(fetch_mu_);

  // Appends to `out` the bytes [begin, end) of a value whose first
  // `data_bytes` are the file (fed to `stream` too, when tagged) and the
  // rest its tag (copied into `tag`).
  static Status TakePiece(std::string_view piece, uint64_t begin,
                          uint64_t data_bytes, WritableFile* out,
                          RecordMac::Stream* stream, std::string* tag);

  const ModelFingerprint model_;
  Env* const env_;
  const std::shared_ptr<const RecordMac> mac_;
  RedisConnection writer_conn_;  // the writer thread only

  mutable Mutex fetch_mu_;
  RedisConnection fetch_conn_ GUARDED_BY(fetch_mu_);

  mutable Mutex mu_;
  CondVar work_cv_;
  CondVar idle_cv_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  SlotFileMirrorStats stats_ GUARDED_BY(mu_);
  std::thread writer_;
};

}  // namespace kvault

#endif  // KVAULT_KV_SLOT_FILE_MIRROR_H_
