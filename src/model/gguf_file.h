// GgufFile: a parsed, validated, read-only GGUF file (versions 2 and 3),
// memory-mapped. Parsing checks everything up front so accessors need not:
// after Open/FromBuffer succeeds every tensor's bytes lie inside the file.
//
// GGUF layout (little-endian): magic "GGUF", u32 version, u64 tensor count,
// u64 metadata count, the metadata (string key, u32 type, value), the tensor
// infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
// relative to the data section), padding to general.alignment (default 32),
// then the data section.
//
// Hostile input: every count, length, offset and shape is checked against
// the file size and against overflow before anything is allocated; strings
// are limited to kGgufMaxStringBytes, arrays to kGgufMaxArrayElements and a
// nesting depth of kGgufMaxArrayDepth. Error codes:
//   Corruption    — the bytes are not a GGUF file kvault accepts: wrong
//                   magic, truncation, a length, count or offset past the
//                   end, a string or array over the limits, invalid value
//                   type id, bool not 0/1, duplicate key or tensor name,
//                   zero or more than 4 dimensions, a zero dimension, shape
//                   or size overflow, unknown tensor type id, a row not a
//                   whole number of blocks, misaligned or overlapping
//                   tensors, a bad general.alignment.
//   Unimplemented — a GGUF version other than 2 and 3 (or big-endian).
// Every message names what was wrong and the byte offset where it was read.
#ifndef KVAULT_MODEL_GGUF_FILE_H_
#define KVAULT_MODEL_GGUF_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/status_or.h"
#include "model/ggml_types.h"
#include "model/gguf_value.h"

namespace kvault {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint64_t kGgufMaxStringBytes = uint64_t{1} << 20;
inline constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 26;
inline constexpr int kGgufMaxArrayDepth = 2;  // array of arrays, no deeper
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr uint64_t kGgufMaxAlignment = uint64_t{1} << 20;

struct GgufMetadataEntry {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // ne0 first (the contiguous dimension), 1..4 entries, each >= 1.
  std::vector<uint64_t> shape;
  uint64_t offset = 0;  // relative to the data section start
  uint64_t size_bytes = 0;
  uint64_t num_elements = 0;
  uint64_t info_offset = 0;  // absolute file offset of this tensor's info

  // Returns shape[i], or 1 for i >= shape.size() (ggml's implicit dims).
  uint64_t ne(size_t i) const { return i < shape.size() ? shape[i] : 1; }
};

class GgufFile {
 public:
  // Loads (maps by default, see LoadMode) and parses the file at `path`;
  // errors are prefixed with the path.
  static StatusOr<std::unique_ptr<GgufFile>> Open(
      const std::string& path, LoadMode mode = LoadMode::kMmap);
  // Parses a GGUF image held in memory (tests, the fuzzer).
  static StatusOr<std::unique_ptr<GgufFile>> FromBuffer(
      std::shared_ptr<const std::string> bytes);
  // Parses an already mapped file (must not be null).
  static StatusOr<std::unique_ptr<GgufFile>> FromMapped(
      std::unique_ptr<MappedFile> file);

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Returns the GGUF version (2 or 3).
  uint32_t version() const { return version_; }
  // Returns the file size in bytes.
  uint64_t file_size() const { return file_->size(); }
  // Returns the path given to Open ("<buffer>" otherwise).
  const std::string& path() const { return file_->path(); }
  // Returns general.alignment (32 when absent).
  uint64_t alignment() const { return alignment_; }
  // Returns the absolute offset of the data section.
  uint64_t data_offset() const { return data_offset_; }
  // Returns the whole file's bytes.
  std::span<const std::byte> bytes() const { return file_->bytes(); }
  // Rewrites the bytes in place when they are private (see
  // MappedFile::RewriteInPlace): returns whether `rewrite` was called.
  StatusOr<bool> RewriteInPlace(
      const std::function<void(std::span<std::byte>)>& rewrite) {
    return file_->RewriteInPlace(rewrite);
  }

  // Returns the metadata entries in file order.
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  // Returns the value of `key`, or null when absent.
  const GgufValue* Find(std::string_view key) const;
  // Returns true when `key` is present.
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed reads of `key`: NotFound naming the key when absent,
  // InvalidArgument naming the key, expected and actual type otherwise.
  StatusOr<std::string> GetString(std::string_view key) const;
  // Returns any integer type's value; negative values fail.
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  // Returns any integer type's value; uint64 above INT64_MAX fails.
  StatusOr<int64_t> GetInt(std::string_view key) const;
  // Returns a float32 or float64 value.
  StatusOr<double> GetFloat(std::string_view key) const;
  // Returns a bool value.
  StatusOr<bool> GetBool(std::string_view key) const;
  // Returns a string array.
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Returns an array of float32 or float64 elements as floats.
  StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  // Returns an array of any integer type's elements.
  StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Returns the tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // Returns the tensor named `name`, or null when absent.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // Returns the bytes of `tensor`, which must be one of tensors().
  std::span<const std::byte> TensorData(const GgufTensorInfo& tensor) const;
  // Returns the bytes of the tensor named `name`; NotFound when absent.
  StatusOr<std::span<const std::byte>> TensorData(std::string_view name) const;

 private:
  friend class GgufParser;
  explicit GgufFile(std::unique_ptr<MappedFile> file);
  StatusOr<const GgufValue*> FindOrError(std::string_view key) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;     // -> metadata_
  std::unordered_map<std::string_view, size_t> tensor_index_;  // -> tensors_
};

}  // namespace kvault

#endif  // KVAULT_MODEL_GGUF_FILE_H_
