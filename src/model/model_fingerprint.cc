#include "model/model_fingerprint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "core/check.h"
#include "model/gguf_writer.h"

namespace kvault {
namespace {

// Owns an XXH3 streaming state.
class Hasher128 {
 public:
  Hasher128() : state_(XXH3_createState()) {
    KV_CHECK(state_ != nullptr) << "XXH3_createState failed";
    XXH3_128bits_reset(state_);
  }
  ~Hasher128() { XXH3_freeState(state_); }
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;

  void Update(const void* data, size_t n) {
    XXH3_128bits_update(state_, data, n);
  }
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  void U64(uint64_t v) { Update(&v, sizeof(v)); }
  // Length-prefixed, so adjacent fields cannot run into each other.
  void String(std::string_view s) {
    U64(s.size());
    Update(s);
  }
  ModelFingerprint Digest() const {
    const XXH128_hash_t h = XXH3_128bits_digest(state_);
    return ModelFingerprint{h.low64, h.high64};
  }

 private:
  XXH3_state_t* state_;
};

void HashMetadata(const GgufFile& file, Hasher128* h) {
  std::vector<const GgufMetadataEntry*> sorted;
  sorted.reserve(file.metadata().size());
  for (const GgufMetadataEntry& e : file.metadata()) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->key < b->key; });
  h->U64(sorted.size());
  std::string encoded;
  for (const GgufMetadataEntry* e : sorted) {
    h->String(e->key);
    h->U64(static_cast<uint64_t>(e->value.type()));
    encoded.clear();
    AppendGgufValue(e->value, &encoded);
    h->String(encoded);
  }
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> FingerprintSampleRanges(
    uint64_t size_bytes, const FingerprintOptions& options) {
  KV_CHECK(options.block_bytes > 0 && options.max_blocks_per_tensor >= 2)
      << "bad FingerprintOptions";
  const uint64_t block = options.block_bytes;
  const uint64_t num_blocks = (size_bytes + block - 1) / block;
  if (num_blocks <= options.max_blocks_per_tensor) {
    if (size_bytes == 0) return {};
    return {{0, size_bytes}};
  }
  // Blocks 0, stride, 2*stride, ... below the last, then the last one.
  const uint64_t stride = (num_blocks - 1 + options.max_blocks_per_tensor - 2) /
                          (options.max_blocks_per_tensor - 1);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint64_t b = 0; b < num_blocks - 1; b += stride) {
    ranges.emplace_back(b * block, (b + 1) * block);
  }
  ranges.emplace_back((num_blocks - 1) * block, size_bytes);
  return ranges;
}

ModelFingerprint ComputeModelFingerprint(const GgufFile& file,
                                         const FingerprintOptions& options) {
  Hasher128 h;
  h.String("kvault-model-fingerprint-v1");
  HashMetadata(file, &h);

  std::vector<const GgufTensorInfo*> tensors;
  tensors.reserve(file.tensors().size());
  for (const GgufTensorInfo& t : file.tensors()) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  h.U64(tensors.size());
  for (const GgufTensorInfo* t : tensors) {
    h.String(t->name);
    h.U64(static_cast<uint64_t>(t->type));
    h.U64(t->shape.size());
    for (uint64_t ne : t->shape) h.U64(ne);
    h.U64(t->size_bytes);
  }
  for (const GgufTensorInfo* t : tensors) {
    const std::span<const std::byte> data = file.TensorData(*t);
    for (const auto& [begin, end] :
         FingerprintSampleRanges(data.size(), options)) {
      h.Update(data.data() + begin, end - begin);
    }
  }
  return h.Digest();
}

}  // namespace kvault
