// RecordMac: a keyed MAC (HMAC-SHA-256, OpenSSL's libcrypto) over what
// kvault shares with other instances through a store it does not control
// (page records and slot files in Redis/Valkey). The checksums inside
// those bytes are unkeyed and catch accidents; anyone who can write to the
// store can recompute them. A sealed value carries a 32-byte tag after its
// bytes that only holders of the secret key can compute: a value written
// by anyone else (or changed, or moved to another name) fails to open.
// Tags bind a label (what the bytes are and where they live), so a value
// of one kind or name never opens as another.
#ifndef KVAULT_CORE_RECORD_MAC_H_
#define KVAULT_CORE_RECORD_MAC_H_

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/status_or.h"

namespace kvault {

inline constexpr size_t kMacTagBytes = 32;
// The shortest key accepted (128 bits).
inline constexpr size_t kMinMacKeyBytes = 16;

using MacTag = std::array<std::byte, kMacTagBytes>;

class RecordMac {
 public:
  // Uses `key` (what names its origin in errors: "--kv-store-key"; the
  // serve command reads it from the file or variable its flags name).
  // InvalidArgument when it is shorter than kMinMacKeyBytes.
  static StatusOr<RecordMac> FromKey(std::string key, std::string_view what);
  // Returns the Corruption (reason checksum_mismatch) of a value whose tag
  // does not match this server's key.
  static Status TagMismatchError();

  // Returns the tag of `data` under `label`.
  MacTag Tag(std::string_view label, std::span<const std::byte> data) const;
  // Appends the tag of `*data` under `label` to it.
  void Seal(std::string_view label, std::string* data) const;
  // Returns the bytes of `sealed` before its tag when the tag is right for
  // them under `label`; Corruption otherwise: reason "checksum_mismatch"
  // (the message names the tag), or "truncated" when it is shorter than a
  // tag.
  StatusOr<std::span<const std::byte>> Open(
      std::string_view label, std::span<const std::byte> sealed) const;

  // Incremental tagging for values read in pieces.
  class Stream {
   public:
    ~Stream();
    Stream(Stream&&) noexcept;
    Stream& operator=(Stream&&) = delete;
    // Adds the next piece.
    void Update(std::span<const std::byte> piece);
    // Returns the tag of everything added (call once).
    MacTag Final();

   private:
    friend class RecordMac;
    explicit Stream(void* ctx) : ctx_(ctx) {}
    void* ctx_;  // EVP_MAC_CTX
  };
  // Starts a Stream under `label`.
  Stream Begin(std::string_view label) const;
  // Returns true when `a` and `b` are equal (in constant time).
  static bool SameTag(const MacTag& a, std::span<const std::byte> b);

 private:
  explicit RecordMac(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_RECORD_MAC_H_
