#include "model/gguf_writer.h"

#include <bit>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "core/memory_file.h"

namespace kvault {
namespace {

template <typename T>
void AppendLe(T v, std::string* out) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));  // hosts are little-endian (gguf_value.cc)
  out->append(buf, sizeof(T));
}

void AppendString(std::string_view s, std::string* out) {
  AppendLe<uint64_t>(s.size(), out);
  out->append(s);
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The reader's limits, so the writer never produces a file kvault refuses.
Status CheckReadable(const GgufValue& v, int depth) {
  if (v.type() == GgufType::kString &&
      v.string_view().size() > kGgufMaxStringBytes) {
    return InvalidArgumentError("string of " +
                                std::to_string(v.string_view().size()) +
                                " bytes is over the GGUF string limit");
  }
  if (!v.is_array()) return Status::Ok();
  // The reader refuses an array of arrays at the deepest level even when
  // it is empty, because the element type alone says it nests deeper.
  const int levels = depth + (v.element_type() == GgufType::kArray ? 2 : 1);
  if (levels > kGgufMaxArrayDepth) {
    return InvalidArgumentError("arrays nested deeper than " +
                                std::to_string(kGgufMaxArrayDepth) + " levels");
  }
  if (v.array_size() > kGgufMaxArrayElements) {
    return InvalidArgumentError("array of " + std::to_string(v.array_size()) +
                                " elements is over the GGUF array limit");
  }
  for (const std::string& s : v.strings()) {
    if (s.size() > kGgufMaxStringBytes) {
      return InvalidArgumentError("array string over the GGUF string limit");
    }
  }
  for (const GgufValue& inner : v.nested()) {
    KV_RETURN_IF_ERROR(CheckReadable(inner, depth + 1));
  }
  return Status::Ok();
}

}  // namespace

void AppendGgufValue(const GgufValue& value, std::string* out) {
  switch (value.type()) {
    case GgufType::kString:
      AppendString(value.string_view(), out);
      return;
    case GgufType::kArray:
      AppendLe<uint32_t>(static_cast<uint32_t>(value.element_type()), out);
      AppendLe<uint64_t>(value.array_size(), out);
      if (value.element_type() == GgufType::kString) {
        for (const std::string& s : value.strings()) AppendString(s, out);
      } else if (value.element_type() == GgufType::kArray) {
        for (const GgufValue& v : value.nested()) AppendGgufValue(v, out);
      } else {
        out->append(value.raw_elements());
      }
      return;
    default: {
      // Little-endian hosts: the payload's low bytes are the encoding.
      const uint64_t bits = value.scalar_bits();
      char buf[8];
      std::memcpy(buf, &bits, 8);
      out->append(buf, GgufScalarBytes(value.type()));
    }
  }
}

GgufWriter::GgufWriter(WritableFile* out, GgufWriterOptions options)
    : out_(out), options_(options) {
  KV_CHECK(out_ != nullptr) << "GgufWriter needs a file";
  KV_CHECK(options_.version == 2 || options_.version == 3)
      << "GGUF version " << options_.version;
  KV_CHECK(options_.alignment != 0 &&
           (options_.alignment & (options_.alignment - 1)) == 0)
      << "alignment " << options_.alignment;
}

Status GgufWriter::AddMetadata(std::string key, GgufValue value) {
  if (header_written_) {
    return FailedPreconditionError("AddMetadata after WriteHeader");
  }
  if (key.empty()) return InvalidArgumentError("empty GGUF metadata key");
  if (key == "general.alignment" && !(value.type() == GgufType::kUint32 &&
                                      *value.AsUint() == options_.alignment)) {
    return InvalidArgumentError("general.alignment must be the uint32 " +
                                std::to_string(options_.alignment) +
                                " the writer aligns to, got " +
                                value.DebugString());
  }
  KV_RETURN_IF_ERROR(
      CheckReadable(value, 0).WithContext("GGUF metadata key '" + key + "'"));
  if (!keys_.insert(key).second) {
    return InvalidArgumentError("duplicate GGUF metadata key '" + key + "'");
  }
  metadata_.push_back({std::move(key), std::move(value)});
  return Status::Ok();
}

Status GgufWriter::AddTensorInfo(std::string name, GgmlType type,
                                 std::vector<uint64_t> shape) {
  if (header_written_) {
    return FailedPreconditionError("AddTensorInfo after WriteHeader");
  }
  if (name.empty()) return InvalidArgumentError("empty GGUF tensor name");
  if (shape.empty() || shape.size() > kGgufMaxDims) {
    return InvalidArgumentError(
        "tensor '" + name + "' has " + std::to_string(shape.size()) +
        " dims, expected 1.." + std::to_string(kGgufMaxDims));
  }
  GgufTensorInfo t;
  t.num_elements = 1;
  for (uint64_t ne : shape) {
    if (ne == 0 || ne > (uint64_t{1} << 62) / t.num_elements) {
      return InvalidArgumentError("tensor '" + name + "' has dimension " +
                                  std::to_string(ne));
    }
    t.num_elements *= ne;
  }
  if (shape[0] % GetGgmlTypeInfo(type).block_size != 0) {
    return InvalidArgumentError(
        "tensor '" + name + "': first dimension " + std::to_string(shape[0]) +
        " is not a multiple of the " + std::string(GgmlTypeName(type)) +
        " block size " + std::to_string(GetGgmlTypeInfo(type).block_size));
  }
  KV_ASSIGN_OR_RETURN(t.size_bytes, GgmlRowBytes(type, t.num_elements));
  if (!tensor_names_.insert(name).second) {
    return InvalidArgumentError("duplicate GGUF tensor name '" + name + "'");
  }
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  t.offset = next_offset_;
  next_offset_ = AlignUp(next_offset_ + t.size_bytes, options_.alignment);
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status GgufWriter::Append(std::string_view bytes) {
  KV_RETURN_IF_ERROR(out_->Append(bytes));
  bytes_written_ += bytes.size();
  return Status::Ok();
}

Status GgufWriter::Pad() {
  const uint64_t padded = AlignUp(bytes_written_, options_.alignment);
  return Append(std::string(padded - bytes_written_, '\0'));
}

Status GgufWriter::WriteHeader() {
  if (header_written_) return FailedPreconditionError("WriteHeader twice");
  header_written_ = true;
  std::string buf;
  AppendLe<uint32_t>(kGgufMagic, &buf);
  AppendLe<uint32_t>(options_.version, &buf);
  AppendLe<uint64_t>(tensors_.size(), &buf);
  AppendLe<uint64_t>(metadata_.size(), &buf);
  for (const GgufMetadataEntry& e : metadata_) {
    AppendString(e.key, &buf);
    AppendLe<uint32_t>(static_cast<uint32_t>(e.value.type()), &buf);
    AppendGgufValue(e.value, &buf);
  }
  for (const GgufTensorInfo& t : tensors_) {
    AppendString(t.name, &buf);
    AppendLe<uint32_t>(static_cast<uint32_t>(t.shape.size()), &buf);
    for (uint64_t ne : t.shape) AppendLe<uint64_t>(ne, &buf);
    AppendLe<uint32_t>(static_cast<uint32_t>(t.type), &buf);
    AppendLe<uint64_t>(t.offset, &buf);
  }
  KV_RETURN_IF_ERROR(Append(buf));
  return Pad();
}

Status GgufWriter::WriteTensorData(std::span<const std::byte> data) {
  if (header_written_ && next_tensor_ < tensors_.size() &&
      (tensor_bytes_done_ != 0 ||
       data.size() != tensors_[next_tensor_].size_bytes)) {
    const GgufTensorInfo& t = tensors_[next_tensor_];
    return InvalidArgumentError(
        "tensor '" + t.name + "' needs " + std::to_string(t.size_bytes) +
        " bytes, got " + std::to_string(data.size()) +
        (tensor_bytes_done_ != 0 ? " after a partial write" : ""));
  }
  return AppendTensorData(data);
}

Status GgufWriter::AppendTensorData(std::span<const std::byte> chunk) {
  if (!header_written_) {
    return FailedPreconditionError("tensor data before WriteHeader");
  }
  if (next_tensor_ >= tensors_.size()) {
    return FailedPreconditionError("tensor data after all " +
                                   std::to_string(tensors_.size()) +
                                   " tensors were written");
  }
  const GgufTensorInfo& t = tensors_[next_tensor_];
  if (chunk.size() > t.size_bytes - tensor_bytes_done_) {
    return InvalidArgumentError(
        "tensor '" + t.name + "': " + std::to_string(chunk.size()) +
        " more bytes after " + std::to_string(tensor_bytes_done_) +
        " run past its size " + std::to_string(t.size_bytes));
  }
  KV_RETURN_IF_ERROR(Append(std::string_view(
      reinterpret_cast<const char*>(chunk.data()), chunk.size())));
  tensor_bytes_done_ += chunk.size();
  if (tensor_bytes_done_ < t.size_bytes) return Status::Ok();
  ++next_tensor_;
  tensor_bytes_done_ = 0;
  return Pad();
}

Status GgufWriter::Finish() {
  if (!header_written_)
    return FailedPreconditionError("Finish before WriteHeader");
  if (next_tensor_ != tensors_.size()) {
    return FailedPreconditionError(
        "Finish after " + std::to_string(next_tensor_) + " of " +
        std::to_string(tensors_.size()) + " tensors were written");
  }
  return Status::Ok();
}

StatusOr<std::string> BuildGgufImage(
    const std::vector<GgufMetadataEntry>& metadata,
    const std::vector<GgufTensorInfo>& tensors,
    const std::vector<std::string>& tensor_data, GgufWriterOptions options) {
  if (tensor_data.size() != tensors.size()) {
    return InvalidArgumentError(std::to_string(tensors.size()) +
                                " tensors but " +
                                std::to_string(tensor_data.size()) + " data");
  }
  std::string image;
  StringWritableFile file(&image);
  GgufWriter writer(&file, options);
  for (const GgufMetadataEntry& e : metadata) {
    KV_RETURN_IF_ERROR(writer.AddMetadata(e.key, e.value));
  }
  for (const GgufTensorInfo& t : tensors) {
    KV_RETURN_IF_ERROR(writer.AddTensorInfo(t.name, t.type, t.shape));
  }
  KV_RETURN_IF_ERROR(writer.WriteHeader());
  for (const std::string& d : tensor_data) {
    KV_RETURN_IF_ERROR(writer.WriteTensorData(std::as_bytes(std::span(d))));
  }
  KV_RETURN_IF_ERROR(writer.Finish());
  return image;
}

}  // namespace kvault
