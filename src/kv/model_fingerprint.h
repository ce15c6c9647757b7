// ModelFingerprint: an opaque 128-bit value that identifies the model a KV
// cache belongs to. The model layer computes it; kv only compares it, so a
// state file is never restored under another model.
#ifndef KVAULT_KV_MODEL_FINGERPRINT_H_
#define KVAULT_KV_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace kvault {

struct ModelFingerprint {
  uint64_t lo = 0;
  uint64_t hi = 0;

  // Returns 32 lowercase hex digits, high half first.
  std::string ToHex() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                  static_cast<unsigned long long>(hi),
                  static_cast<unsigned long long>(lo));
    return buf;
  }
  friend bool operator==(const ModelFingerprint&,
                         const ModelFingerprint&) = default;
};

}  // namespace kvault

#endif  // KVAULT_KV_MODEL_FINGERPRINT_H_
