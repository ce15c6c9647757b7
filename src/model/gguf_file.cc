#include "model/gguf_file.h"

#include <utility>

#include "core/check.h"
#include "model/gguf_parser.h"

namespace kvault {

GgufFile::GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                   LoadMode mode) {
  StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path, mode);
  if (!mapped.ok()) return mapped.status();
  StatusOr<std::unique_ptr<GgufFile>> file =
      FromMapped(std::move(mapped).value());
  if (!file.ok()) return file.status().WithContext(path);
  return file;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(
    std::shared_ptr<const std::string> bytes) {
  return FromMapped(MappedFile::FromBuffer(std::move(bytes)));
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromMapped(
    std::unique_ptr<MappedFile> file) {
  KV_CHECK(file != nullptr) << "GgufFile::FromMapped(nullptr)";
  std::unique_ptr<GgufFile> gguf(new GgufFile(std::move(file)));
  KV_RETURN_IF_ERROR(GgufParser::Parse(gguf.get()));
  return gguf;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

StatusOr<const GgufValue*> GgufFile::FindOrError(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return NotFoundError("GGUF metadata key '" + std::string(key) +
                         "' not found");
  }
  return v;
}

namespace {

// Runs `read` on the value of `key`, naming the key in any error.
template <typename T, typename Read>
StatusOr<T> ReadKey(StatusOr<const GgufValue*> value, std::string_view key,
                    Read read) {
  if (!value.ok()) return value.status();
  StatusOr<T> out = read(**value);
  if (!out.ok()) {
    return out.status().WithContext("GGUF metadata key '" + std::string(key) +
                                    "'");
  }
  return out;
}

}  // namespace

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  return ReadKey<std::string>(FindOrError(key), key,
                              [](const GgufValue& v) { return v.AsString(); });
}

StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  return ReadKey<uint64_t>(FindOrError(key), key,
                           [](const GgufValue& v) { return v.AsUint(); });
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  return ReadKey<int64_t>(FindOrError(key), key,
                          [](const GgufValue& v) { return v.AsInt(); });
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  return ReadKey<double>(FindOrError(key), key,
                         [](const GgufValue& v) { return v.AsFloat(); });
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  return ReadKey<bool>(FindOrError(key), key,
                       [](const GgufValue& v) { return v.AsBool(); });
}

StatusOr<std::vector<std::string>> GgufFile::GetStringArray(
    std::string_view key) const {
  return ReadKey<std::vector<std::string>>(
      FindOrError(key), key,
      [](const GgufValue& v) { return v.AsStringArray(); });
}

StatusOr<std::vector<float>> GgufFile::GetFloatArray(
    std::string_view key) const {
  return ReadKey<std::vector<float>>(
      FindOrError(key), key,
      [](const GgufValue& v) { return v.AsFloatArray(); });
}

StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(
    std::string_view key) const {
  return ReadKey<std::vector<int64_t>>(
      FindOrError(key), key, [](const GgufValue& v) { return v.AsIntArray(); });
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::TensorData(
    const GgufTensorInfo& tensor) const {
  KV_CHECK(&tensor >= tensors_.data() &&
           &tensor < tensors_.data() + tensors_.size())
      << "TensorData of a tensor not from this file";
  // The parser checked that the range lies inside the file.
  return bytes().subspan(data_offset_ + tensor.offset, tensor.size_bytes);
}

StatusOr<std::span<const std::byte>> GgufFile::TensorData(
    std::string_view name) const {
  const GgufTensorInfo* t = FindTensor(name);
  if (t == nullptr) {
    return NotFoundError("GGUF tensor '" + std::string(name) + "' not found");
  }
  return TensorData(*t);
}

}  // namespace kvault
