// GgufWriter: writes a GGUF file (version 3 by default, little-endian) in
// one pass and bounded memory, so multi-GB generated models never sit in
// RAM: first every metadata entry and tensor info is declared, then
// WriteHeader() emits the header, metadata, tensor infos and padding, then
// each tensor's bytes are streamed in declaration order.
//
// Layout (the GGUF spec): tensor i starts at data offset
// align_up(end of tensor i-1), the data section at align_up(end of infos),
// with `alignment` (general.alignment, default 32) zero padding; the file
// ends after the last tensor's padding.
#ifndef KVAULT_MODEL_GGUF_WRITER_H_
#define KVAULT_MODEL_GGUF_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "model/ggml_types.h"
#include "model/gguf_file.h"
#include "model/gguf_value.h"

namespace kvault {

struct GgufWriterOptions {
  uint32_t version = 3;  // 2 or 3 (identical layouts)
  uint32_t alignment = kGgufDefaultAlignment;
};

class GgufWriter {
 public:
  // Writes to `out`, which must outlive the writer; the writer neither syncs
  // nor closes it. The options must be valid (version 2/3, power-of-two
  // alignment).
  explicit GgufWriter(WritableFile* out, GgufWriterOptions options = {});

  // Declares a metadata entry (written in call order). InvalidArgument for a
  // duplicate or empty key, a value over the reader's limits (string
  // length, array length, nesting depth), or a general.alignment that is
  // not the uint32 alignment of the options.
  Status AddMetadata(std::string key, GgufValue value);
  // Declares a tensor (written in call order). InvalidArgument for a
  // duplicate or empty name, 0 or more than 4 dims, a zero dim, or a first
  // dim that is not a multiple of the type's block size.
  Status AddTensorInfo(std::string name, GgmlType type,
                       std::vector<uint64_t> shape);
  // Writes header, metadata, tensor infos and the padding before the data
  // section. FailedPrecondition when called twice.
  Status WriteHeader();
  // Appends the next declared tensor's bytes (exactly its size) and its
  // padding. FailedPrecondition before WriteHeader or after the last tensor;
  // InvalidArgument on a size mismatch.
  Status WriteTensorData(std::span<const std::byte> data);
  // Appends the next part of the current tensor's bytes, so a large tensor
  // can be produced in pieces; the tensor is complete (and padded) once its
  // size has been appended. The same errors as WriteTensorData, plus
  // InvalidArgument when `chunk` runs past the tensor's end.
  Status AppendTensorData(std::span<const std::byte> chunk);
  // FailedPrecondition unless the header and every tensor were written.
  Status Finish();

  // Returns the declared tensors with their offsets and sizes.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // Returns the bytes written so far.
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status Append(std::string_view bytes);
  Status Pad();

  WritableFile* out_;
  GgufWriterOptions options_;
  std::vector<GgufMetadataEntry> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_set<std::string> keys_;
  std::unordered_set<std::string> tensor_names_;
  uint64_t next_offset_ = 0;  // data-relative offset of the next tensor
  uint64_t bytes_written_ = 0;
  bool header_written_ = false;
  size_t next_tensor_ = 0;
  uint64_t tensor_bytes_done_ = 0;  // of tensors_[next_tensor_]
};

// Appends the GGUF encoding of `value` (without a type id for scalars;
// arrays include their element type and count) to `out`.
void AppendGgufValue(const GgufValue& value, std::string* out);

// Builds a whole GGUF image in memory; the tensors' data are given in
// `tensor_data` (same order and sizes as `tensors`' types and shapes).
// For tests and small files.
StatusOr<std::string> BuildGgufImage(
    const std::vector<GgufMetadataEntry>& metadata,
    const std::vector<GgufTensorInfo>& tensors,
    const std::vector<std::string>& tensor_data,
    GgufWriterOptions options = {});

}  // namespace kvault

#endif  // KVAULT_MODEL_GGUF_WRITER_H_
