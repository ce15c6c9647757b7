#include "model/gguf_parser.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvault {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 80));
  if (s.size() > 80) out += "...";
  return out + "'";
}

// A read position over the file; every read checks the bytes left first,
// so no count or length read from the file can send it past the end.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  // Corruption unless `n` more bytes exist.
  Status Need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return Status::Ok();
    return CorruptionError("truncated GGUF: " + std::string(what) +
                           " at offset " + std::to_string(pos_) + " needs " +
                           std::to_string(n) + " bytes, " +
                           std::to_string(remaining()) + " left");
  }
  StatusOr<std::string_view> Bytes(uint64_t n, std::string_view what) {
    KV_RETURN_IF_ERROR(Need(n, what));
    std::string_view out(reinterpret_cast<const char*>(bytes_.data()) + pos_,
                         static_cast<size_t>(n));
    pos_ += n;
    return out;
  }
  StatusOr<uint32_t> U32(std::string_view what) {
    KV_ASSIGN_OR_RETURN(std::string_view b, Bytes(4, what));
    uint32_t v;
    std::memcpy(&v, b.data(), 4);
    return v;
  }
  StatusOr<uint64_t> U64(std::string_view what) {
    KV_ASSIGN_OR_RETURN(std::string_view b, Bytes(8, what));
    uint64_t v;
    std::memcpy(&v, b.data(), 8);
    return v;
  }
  // A GGUF string: u64 length then that many bytes (not NUL-terminated).
  StatusOr<std::string> String(std::string_view what) {
    const uint64_t at = pos_;
    KV_ASSIGN_OR_RETURN(uint64_t len, U64(what));
    if (len > kGgufMaxStringBytes) {
      return CorruptionError(std::string(what) + " at offset " +
                             std::to_string(at) + " has length " +
                             std::to_string(len) + ", over the limit of " +
                             std::to_string(kGgufMaxStringBytes));
    }
    KV_ASSIGN_OR_RETURN(std::string_view b, Bytes(len, what));
    return std::string(b);
  }

 private:
  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
};

StatusOr<GgufType> ReadValueType(Cursor* in, std::string_view what) {
  const uint64_t at = in->pos();
  KV_ASSIGN_OR_RETURN(uint32_t id, in->U32(what));
  if (!IsValidGgufType(id)) {
    return CorruptionError("invalid " + std::string(what) + " " +
                           std::to_string(id) + " at offset " +
                           std::to_string(at));
  }
  return static_cast<GgufType>(id);
}

Status CheckBools(std::string_view bytes, uint64_t at) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b > 1) {
      return CorruptionError("bool value " + std::to_string(b) +
                             " (not 0 or 1) at offset " +
                             std::to_string(at + i));
    }
  }
  return Status::Ok();
}

StatusOr<GgufValue> ReadArray(Cursor* in, int depth);

StatusOr<GgufValue> ReadValue(Cursor* in, GgufType type, int depth) {
  if (type == GgufType::kString) {
    KV_ASSIGN_OR_RETURN(std::string s, in->String("string value"));
    return GgufValue::String(std::move(s));
  }
  if (type == GgufType::kArray) return ReadArray(in, depth + 1);
  const uint64_t at = in->pos();
  KV_ASSIGN_OR_RETURN(std::string_view b,
                      in->Bytes(GgufScalarBytes(type), GgufTypeName(type)));
  if (type == GgufType::kBool) KV_RETURN_IF_ERROR(CheckBools(b, at));
  return GgufValue::ScalarFromBytes(type, b);
}

// Reads an array's elements at nesting level `depth` (1 = a top-level
// array). Sizes are checked against the limits and the bytes left before
// anything is reserved.
StatusOr<GgufValue> ReadArray(Cursor* in, int depth) {
  const uint64_t at = in->pos();
  KV_ASSIGN_OR_RETURN(GgufType type, ReadValueType(in, "array element type"));
  KV_ASSIGN_OR_RETURN(uint64_t count, in->U64("array length"));
  if (count > kGgufMaxArrayElements) {
    return CorruptionError("array at offset " + std::to_string(at) + " has " +
                           std::to_string(count) +
                           " elements, over the limit of " +
                           std::to_string(kGgufMaxArrayElements));
  }
  if (type == GgufType::kString) {
    KV_RETURN_IF_ERROR(in->Need(count * 8, "string array"));
    std::vector<std::string> strings;
    strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      KV_ASSIGN_OR_RETURN(std::string s, in->String("string array element"));
      strings.push_back(std::move(s));
    }
    return GgufValue::StringArray(std::move(strings));
  }
  if (type == GgufType::kArray) {
    if (depth + 1 > kGgufMaxArrayDepth) {
      return CorruptionError("array at offset " + std::to_string(at) +
                             " nests arrays deeper than " +
                             std::to_string(kGgufMaxArrayDepth) + " levels");
    }
    KV_RETURN_IF_ERROR(in->Need(count * 12, "array of arrays"));
    std::vector<GgufValue> nested;
    nested.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      KV_ASSIGN_OR_RETURN(GgufValue v, ReadArray(in, depth + 1));
      nested.push_back(std::move(v));
    }
    return GgufValue::ArrayOfArrays(std::move(nested));
  }
  const uint64_t data_at = in->pos();
  KV_ASSIGN_OR_RETURN(std::string_view b,
                      in->Bytes(count * GgufScalarBytes(type), "array data"));
  if (type == GgufType::kBool) KV_RETURN_IF_ERROR(CheckBools(b, data_at));
  return GgufValue::RawArray(type, std::string(b));
}

}  // namespace

namespace {

constexpr uint64_t kMinMetadataBytes = 8 + 4 + 1;  // key len, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // 1 dim

struct Header {
  uint32_t version = 0;
  uint64_t num_tensors = 0;
  uint64_t num_metadata = 0;
};

StatusOr<Header> ReadHeader(Cursor* in) {
  Header h;
  KV_ASSIGN_OR_RETURN(uint32_t magic, in->U32("magic"));
  if (magic != kGgufMagic) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    return CorruptionError(
        std::string("not a GGUF file: magic at offset 0 is ") + hex +
        ", expected \"GGUF\"");
  }
  KV_ASSIGN_OR_RETURN(h.version, in->U32("version"));
  if (h.version == 0x02000000u || h.version == 0x03000000u) {
    return UnimplementedError("big-endian GGUF files are not supported");
  }
  if (h.version != 2 && h.version != 3) {
    return UnimplementedError("GGUF version " + std::to_string(h.version) +
                              " at offset 4 is not supported (only 2 and 3)");
  }
  KV_ASSIGN_OR_RETURN(h.num_tensors, in->U64("tensor count"));
  KV_ASSIGN_OR_RETURN(h.num_metadata, in->U64("metadata count"));
  // Each entry needs a minimum number of bytes, so counts the file cannot
  // hold are refused before anything is sized by them.
  const uint64_t left = in->remaining();
  if (h.num_metadata > left / kMinMetadataBytes ||
      h.num_tensors > left / kMinTensorInfoBytes ||
      h.num_metadata * kMinMetadataBytes >
          left - h.num_tensors * kMinTensorInfoBytes) {
    return CorruptionError(
        "GGUF header at offset 8: " + std::to_string(h.num_tensors) +
        " tensors and " + std::to_string(h.num_metadata) +
        " metadata entries cannot fit in the " + std::to_string(left) +
        " bytes left");
  }
  return h;
}

StatusOr<GgufMetadataEntry> ReadMetadataEntry(Cursor* in) {
  GgufMetadataEntry entry;
  KV_ASSIGN_OR_RETURN(entry.key, in->String("metadata key"));
  Status s = [&]() -> Status {
    KV_ASSIGN_OR_RETURN(GgufType type, ReadValueType(in, "value type"));
    KV_ASSIGN_OR_RETURN(entry.value, ReadValue(in, type, 0));
    return Status::Ok();
  }();
  if (!s.ok()) return s.WithContext("metadata key " + Quote(entry.key));
  return entry;
}

StatusOr<uint64_t> ReadAlignment(const GgufValue& v, uint64_t key_offset) {
  const std::string where =
      "general.alignment (key at offset " + std::to_string(key_offset) + ")";
  StatusOr<uint64_t> a = v.AsUint();
  if (!a.ok())
    return CorruptionError(where + ": " + std::string(a.status().message()));
  if (*a == 0 || (*a & (*a - 1)) != 0 || *a > kGgufMaxAlignment) {
    return CorruptionError(
        where + " is " + std::to_string(*a) +
        ", expected a power of two <= " + std::to_string(kGgufMaxAlignment));
  }
  return *a;
}

// Reads the shape of a tensor and fills shape and num_elements.
Status ReadShape(Cursor* in, GgufTensorInfo* t) {
  const uint64_t at = in->pos();
  KV_ASSIGN_OR_RETURN(uint32_t n_dims, in->U32("n_dims"));
  if (n_dims == 0 || n_dims > kGgufMaxDims) {
    return CorruptionError("n_dims " + std::to_string(n_dims) + " at offset " +
                           std::to_string(at) + ", expected 1.." +
                           std::to_string(kGgufMaxDims));
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  t->num_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim_at = in->pos();
    KV_ASSIGN_OR_RETURN(uint64_t ne, in->U64("dimension"));
    if (ne == 0 || ne > kMax || t->num_elements > kMax / ne) {
      return CorruptionError(
          "dimension " + std::to_string(d) + " = " + std::to_string(ne) +
          " at offset " + std::to_string(dim_at) +
          (ne == 0 ? " is zero" : " overflows the element count"));
    }
    t->shape.push_back(ne);
    t->num_elements *= ne;
  }
  return Status::Ok();
}

StatusOr<GgufTensorInfo> ReadTensorInfo(Cursor* in, uint64_t alignment) {
  GgufTensorInfo t;
  t.info_offset = in->pos();
  KV_ASSIGN_OR_RETURN(t.name, in->String("tensor name"));
  Status s = [&]() -> Status {
    KV_RETURN_IF_ERROR(ReadShape(in, &t));
    const uint64_t type_at = in->pos();
    KV_ASSIGN_OR_RETURN(uint32_t type_id, in->U32("tensor type"));
    const GgmlTypeInfo* info = FindGgmlType(type_id);
    if (info == nullptr) {
      return CorruptionError("unknown ggml type id " + std::to_string(type_id) +
                             " at offset " + std::to_string(type_at));
    }
    t.type = info->type;
    StatusOr<uint64_t> bytes = GgmlRowBytes(t.type, t.num_elements);
    if (t.shape[0] % info->block_size != 0 || !bytes.ok()) {
      return CorruptionError("shape [" + std::to_string(t.shape[0]) +
                             ", ...] does not fit type " +
                             std::string(info->name) + " (block size " +
                             std::to_string(info->block_size) + ")");
    }
    t.size_bytes = *bytes;
    const uint64_t offset_at = in->pos();
    KV_ASSIGN_OR_RETURN(t.offset, in->U64("tensor data offset"));
    if (t.offset % alignment != 0) {
      return CorruptionError("data offset " + std::to_string(t.offset) +
                             " at offset " + std::to_string(offset_at) +
                             " is not a multiple of the alignment " +
                             std::to_string(alignment));
    }
    return Status::Ok();
  }();
  if (!s.ok()) {
    return s.WithContext("tensor " + Quote(t.name) + " (info at offset " +
                         std::to_string(t.info_offset) + ")");
  }
  return t;
}

}  // namespace

namespace {

// "tensor 'NAME' (q4_K [256, 768]: 110592 bytes; info at offset N)": what
// a layout error needs to say about a tensor.
std::string Describe(const GgufTensorInfo& t) {
  std::string shape;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  }
  return "tensor " + Quote(t.name) + " (" + std::string(GgmlTypeName(t.type)) +
         " [" + shape + "]: " + std::to_string(t.size_bytes) +
         " bytes; info at offset " + std::to_string(t.info_offset) + ")";
}

// Checks that every tensor's bytes lie inside the data section and that no
// two tensors share a byte (a tensor whose type and shape need more bytes
// than the file gives it fails one of the two).
Status CheckTensorLayout(const std::vector<GgufTensorInfo>& tensors,
                         uint64_t data_offset, uint64_t file_size) {
  const uint64_t data_bytes = file_size - data_offset;
  for (const GgufTensorInfo& t : tensors) {
    if (t.offset > data_bytes || t.size_bytes > data_bytes - t.offset) {
      return CorruptionError(
          Describe(t) + ": data [" + std::to_string(t.offset) + ", +" +
          std::to_string(t.size_bytes) + ") relative to the data section at " +
          std::to_string(data_offset) +
          " runs past the end of the file (size " + std::to_string(file_size) +
          ")");
    }
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].offset < tensors[b].offset;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = tensors[order[i - 1]];
    const GgufTensorInfo& cur = tensors[order[i]];
    if (prev.offset + prev.size_bytes > cur.offset) {
      return CorruptionError(
          Describe(prev) + " at [" + std::to_string(prev.offset) + ", " +
          std::to_string(prev.offset + prev.size_bytes) + ") overlaps " +
          Describe(cur) + " at [" + std::to_string(cur.offset) + ", " +
          std::to_string(cur.offset + cur.size_bytes) +
          ") (offsets relative to the data section at " +
          std::to_string(data_offset) + ")");
    }
  }
  return Status::Ok();
}

using KeyIndex = std::unordered_map<std::string_view, size_t>;

Status ReadAllMetadata(Cursor* in, uint64_t count,
                       std::vector<GgufMetadataEntry>* metadata,
                       std::vector<uint64_t>* key_offsets) {
  key_offsets->reserve(count);  // count was checked against the file size
  metadata->reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    key_offsets->push_back(in->pos());
    StatusOr<GgufMetadataEntry> e = ReadMetadataEntry(in);
    if (!e.ok()) {
      return e.status().WithContext("metadata entry " + std::to_string(i) +
                                    " at offset " +
                                    std::to_string(key_offsets->back()));
    }
    metadata->push_back(std::move(e).value());
  }
  return Status::Ok();
}

// Indexes the keys; `metadata` must not change afterwards (the index holds
// views of its strings).
Status IndexMetadata(const std::vector<GgufMetadataEntry>& metadata,
                     const std::vector<uint64_t>& key_offsets,
                     KeyIndex* index) {
  for (size_t i = 0; i < metadata.size(); ++i) {
    auto [it, inserted] = index->emplace(metadata[i].key, i);
    if (!inserted) {
      return CorruptionError(
          "duplicate metadata key " + Quote(metadata[i].key) + " at offset " +
          std::to_string(key_offsets[i]) + " (first at offset " +
          std::to_string(key_offsets[it->second]) + ")");
    }
  }
  return Status::Ok();
}

Status ReadAllTensorInfos(Cursor* in, uint64_t count, uint64_t alignment,
                          std::vector<GgufTensorInfo>* tensors) {
  tensors->reserve(count);  // count was checked against the file size
  for (uint64_t i = 0; i < count; ++i) {
    KV_ASSIGN_OR_RETURN(GgufTensorInfo t, ReadTensorInfo(in, alignment));
    tensors->push_back(std::move(t));
  }
  return Status::Ok();
}

// As IndexMetadata, for tensor names.
Status IndexTensors(const std::vector<GgufTensorInfo>& tensors,
                    KeyIndex* index) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto [it, inserted] = index->emplace(tensors[i].name, i);
    if (!inserted) {
      return CorruptionError(
          "duplicate tensor name " + Quote(tensors[i].name) + " at offset " +
          std::to_string(tensors[i].info_offset) + " (first at offset " +
          std::to_string(tensors[it->second].info_offset) + ")");
    }
  }
  return Status::Ok();
}

// The data section starts at the next multiple of the alignment after the
// tensor infos. A file without tensors (a vocab-only GGUF) may end before
// that padding; its data section is then empty at the end of the file.
StatusOr<uint64_t> DataOffset(uint64_t infos_end, uint64_t alignment,
                              uint64_t file_size, bool has_tensors) {
  const uint64_t offset = (infos_end + alignment - 1) / alignment * alignment;
  if (offset <= file_size) return offset;
  if (!has_tensors) return file_size;
  return CorruptionError("truncated GGUF: data section at offset " +
                         std::to_string(offset) +
                         " starts past the end of the file (size " +
                         std::to_string(file_size) + ")");
}

}  // namespace

Status GgufParser::Parse(GgufFile* file) {
  Cursor in(file->file_->bytes());
  KV_ASSIGN_OR_RETURN(Header h, ReadHeader(&in));
  file->version_ = h.version;
  std::vector<uint64_t> key_offsets;
  KV_RETURN_IF_ERROR(
      ReadAllMetadata(&in, h.num_metadata, &file->metadata_, &key_offsets));
  KV_RETURN_IF_ERROR(
      IndexMetadata(file->metadata_, key_offsets, &file->key_index_));
  if (auto it = file->key_index_.find("general.alignment");
      it != file->key_index_.end()) {
    KV_ASSIGN_OR_RETURN(file->alignment_,
                        ReadAlignment(file->metadata_[it->second].value,
                                      key_offsets[it->second]));
  }
  KV_RETURN_IF_ERROR(ReadAllTensorInfos(&in, h.num_tensors, file->alignment_,
                                        &file->tensors_));
  KV_RETURN_IF_ERROR(IndexTensors(file->tensors_, &file->tensor_index_));
  KV_ASSIGN_OR_RETURN(file->data_offset_,
                      DataOffset(in.pos(), file->alignment_,
                                 file->file_->size(), !file->tensors_.empty()));
  return CheckTensorLayout(file->tensors_, file->data_offset_,
                           file->file_->size());
}

}  // namespace kvault
