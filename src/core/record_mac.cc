#include "core/record_mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstring>

#include "core/check.h"
#include "core/reasons.h"

namespace kvault {
namespace {

// A new HMAC-SHA-256 context keyed with `key`. Allocation failures abort:
// they only happen when the process is out of memory.
EVP_MAC_CTX* NewContext(const std::string& key) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  KV_CHECK(mac != nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  EVP_MAC_free(mac);  // the context holds its own reference
  KV_CHECK(ctx != nullptr);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  KV_CHECK(EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()),
                        key.size(), params) == 1);
  return ctx;
}

void Feed(void* ctx, const void* data, size_t n) {
  KV_CHECK(EVP_MAC_update(static_cast<EVP_MAC_CTX*>(ctx),
                          static_cast<const unsigned char*>(data), n) == 1);
}

}  // namespace

StatusOr<RecordMac> RecordMac::FromKey(std::string key, std::string_view what) {
  if (!key.empty() && key.back() == '\n') key.pop_back();
  if (key.size() < kMinMacKeyBytes) {
    return InvalidArgumentError(
        "the store key from " + std::string(what) + " is " +
        std::to_string(key.size()) + " bytes; at least " +
        std::to_string(kMinMacKeyBytes) +
        " are needed (e.g. openssl rand -hex 32 > FILE)");
  }
  return RecordMac(std::move(key));
}

Status RecordMac::TagMismatchError() {
  return CorruptionError(
             "its tag does not match: it was not written by a server "
             "holding this store key (or was changed since)")
      .WithReason(kReasonChecksumMismatch);
}

RecordMac::Stream::~Stream() {
  EVP_MAC_CTX_free(static_cast<EVP_MAC_CTX*>(ctx_));
}

RecordMac::Stream::Stream(Stream&& other) noexcept : ctx_(other.ctx_) {
  other.ctx_ = nullptr;
}

void RecordMac::Stream::Update(std::span<const std::byte> piece) {
  Feed(ctx_, piece.data(), piece.size());
}

MacTag RecordMac::Stream::Final() {
  MacTag tag{};
  size_t n = 0;
  KV_CHECK(EVP_MAC_final(static_cast<EVP_MAC_CTX*>(ctx_),
                         reinterpret_cast<unsigned char*>(tag.data()), &n,
                         tag.size()) == 1);
  KV_CHECK(n == tag.size());
  return tag;
}

RecordMac::Stream RecordMac::Begin(std::string_view label) const {
  Stream s(NewContext(key_));
  // The label's length first: no label is a prefix of another's input.
  const uint64_t n = label.size();
  Feed(s.ctx_, &n, sizeof(n));
  Feed(s.ctx_, label.data(), label.size());
  return s;
}

MacTag RecordMac::Tag(std::string_view label,
                      std::span<const std::byte> data) const {
  Stream s = Begin(label);
  s.Update(data);
  return s.Final();
}

void RecordMac::Seal(std::string_view label, std::string* data) const {
  const MacTag tag = Tag(label, std::as_bytes(std::span(*data)));
  data->append(reinterpret_cast<const char*>(tag.data()), tag.size());
}

bool RecordMac::SameTag(const MacTag& a, std::span<const std::byte> b) {
  return b.size() == a.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

StatusOr<std::span<const std::byte>> RecordMac::Open(
    std::string_view label, std::span<const std::byte> sealed) const {
  if (sealed.size() < kMacTagBytes) {
    return CorruptionError("value of " + std::to_string(sealed.size()) +
                           " bytes is shorter than its " +
                           std::to_string(kMacTagBytes) + "-byte tag")
        .WithReason(kReasonTruncated);
  }
  const std::span<const std::byte> data =
      sealed.first(sealed.size() - kMacTagBytes);
  if (!SameTag(Tag(label, data), sealed.last(kMacTagBytes))) {
    return TagMismatchError();
  }
  return data;
}

}  // namespace kvault
