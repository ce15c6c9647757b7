#include "model/gguf_value.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

#include "core/check.h"

namespace kvault {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF values are decoded by memcpy on little-endian hosts");

// Reads the `i`th little-endian element of `type` from `raw` as raw bits:
// integers sign- or zero-extended to 64 bits, floats as their own bits.
uint64_t LoadBits(GgufType type, std::string_view raw, uint64_t i) {
  const size_t size = GgufScalarBytes(type);
  const char* p = raw.data() + i * size;
  switch (type) {
    case GgufType::kInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case GgufType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case GgufType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    default: {
      uint64_t v = 0;
      std::memcpy(&v, p, size);
      return v;
    }
  }
}

bool IsSigned(GgufType type) {
  return type == GgufType::kInt8 || type == GgufType::kInt16 ||
         type == GgufType::kInt32 || type == GgufType::kInt64;
}

double BitsToDouble(GgufType type, uint64_t bits) {
  if (type == GgufType::kFloat32) {
    return static_cast<double>(
        std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  return std::bit_cast<double>(bits);
}

}  // namespace

bool IsValidGgufType(uint32_t id) { return id <= 12; }

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "invalid";
}

size_t GgufScalarBytes(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool IsGgufInteger(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

GgufValue GgufValue::FromBits(GgufType type, uint64_t bits) {
  GgufValue v;
  v.type_ = type;
  v.bits_ = bits;
  return v;
}

GgufValue GgufValue::Uint8(uint8_t v) { return FromBits(GgufType::kUint8, v); }
GgufValue GgufValue::Int8(int8_t v) {
  return FromBits(GgufType::kInt8, static_cast<uint64_t>(int64_t{v}));
}
GgufValue GgufValue::Uint16(uint16_t v) {
  return FromBits(GgufType::kUint16, v);
}
GgufValue GgufValue::Int16(int16_t v) {
  return FromBits(GgufType::kInt16, static_cast<uint64_t>(int64_t{v}));
}
GgufValue GgufValue::Uint32(uint32_t v) {
  return FromBits(GgufType::kUint32, v);
}
GgufValue GgufValue::Int32(int32_t v) {
  return FromBits(GgufType::kInt32, static_cast<uint64_t>(int64_t{v}));
}
GgufValue GgufValue::Uint64(uint64_t v) {
  return FromBits(GgufType::kUint64, v);
}
GgufValue GgufValue::Int64(int64_t v) {
  return FromBits(GgufType::kInt64, static_cast<uint64_t>(v));
}
GgufValue GgufValue::Float32(float v) {
  return FromBits(GgufType::kFloat32, std::bit_cast<uint32_t>(v));
}
GgufValue GgufValue::Float64(double v) {
  return FromBits(GgufType::kFloat64, std::bit_cast<uint64_t>(v));
}
GgufValue GgufValue::Bool(bool v) { return FromBits(GgufType::kBool, v); }
GgufValue GgufValue::String(std::string v) {
  GgufValue value;
  value.type_ = GgufType::kString;
  value.string_ = std::move(v);
  return value;
}

GgufValue GgufValue::ScalarFromBytes(GgufType type, std::string_view le_bytes) {
  KV_CHECK(GgufScalarBytes(type) != 0 &&
           le_bytes.size() == GgufScalarBytes(type))
      << "ScalarFromBytes of " << GgufTypeName(type) << " from "
      << le_bytes.size() << " bytes";
  return FromBits(type, LoadBits(type, le_bytes, 0));
}

GgufValue GgufValue::StringArray(std::vector<std::string> v) {
  GgufValue value;
  value.type_ = GgufType::kArray;
  value.element_type_ = GgufType::kString;
  value.strings_ = std::move(v);
  return value;
}

GgufValue GgufValue::RawArray(GgufType element_type, std::string raw) {
  const size_t size = GgufScalarBytes(element_type);
  KV_CHECK(size != 0 && raw.size() % size == 0)
      << "RawArray of " << GgufTypeName(element_type) << " from " << raw.size()
      << " bytes";
  GgufValue value;
  value.type_ = GgufType::kArray;
  value.element_type_ = element_type;
  value.raw_ = std::move(raw);
  return value;
}

namespace {
template <typename T>
std::string ToRaw(std::span<const T> v) {
  std::string raw(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  return raw;
}
}  // namespace

GgufValue GgufValue::Float32Array(std::span<const float> v) {
  return RawArray(GgufType::kFloat32, ToRaw(v));
}
GgufValue GgufValue::Int32Array(std::span<const int32_t> v) {
  return RawArray(GgufType::kInt32, ToRaw(v));
}
GgufValue GgufValue::Uint32Array(std::span<const uint32_t> v) {
  return RawArray(GgufType::kUint32, ToRaw(v));
}
GgufValue GgufValue::Int64Array(std::span<const int64_t> v) {
  return RawArray(GgufType::kInt64, ToRaw(v));
}

GgufValue GgufValue::ArrayOfArrays(std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    KV_CHECK(e.is_array()) << "ArrayOfArrays element of type "
                           << GgufTypeName(e.type());
  }
  GgufValue value;
  value.type_ = GgufType::kArray;
  value.element_type_ = GgufType::kArray;
  value.nested_ = std::move(elements);
  return value;
}

uint64_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  switch (element_type_) {
    case GgufType::kString:
      return strings_.size();
    case GgufType::kArray:
      return nested_.size();
    default:
      return raw_.size() / GgufScalarBytes(element_type_);
  }
}

Status GgufValue::TypeError(std::string_view expected) const {
  std::string actual(GgufTypeName(type_));
  if (is_array()) actual += " of " + std::string(GgufTypeName(element_type_));
  return InvalidArgumentError("expected " + std::string(expected) + ", got " +
                              actual);
}

StatusOr<uint64_t> GgufValue::AsUint() const {
  if (!IsGgufInteger(type_)) return TypeError("an integer");
  if (IsSigned(type_) && static_cast<int64_t>(bits_) < 0) {
    return InvalidArgumentError("expected a non-negative integer, got " +
                                std::to_string(static_cast<int64_t>(bits_)));
  }
  return bits_;
}

StatusOr<int64_t> GgufValue::AsInt() const {
  if (!IsGgufInteger(type_)) return TypeError("an integer");
  if (type_ == GgufType::kUint64 &&
      bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("uint64 value " + std::to_string(bits_) +
                                " does not fit in int64");
  }
  return static_cast<int64_t>(bits_);
}

StatusOr<double> GgufValue::AsFloat() const {
  if (type_ != GgufType::kFloat32 && type_ != GgufType::kFloat64) {
    return TypeError("float32 or float64");
  }
  return BitsToDouble(type_, bits_);
}

StatusOr<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return TypeError("bool");
  return bits_ != 0;
}

StatusOr<std::string> GgufValue::AsString() const {
  if (type_ != GgufType::kString) return TypeError("string");
  return string_;
}

std::string_view GgufValue::string_view() const {
  KV_CHECK(type_ == GgufType::kString)
      << "string_view() of a " << GgufTypeName(type_);
  return string_;
}

StatusOr<std::vector<std::string>> GgufValue::AsStringArray() const {
  if (!is_array() || element_type_ != GgufType::kString) {
    return TypeError("array of string");
  }
  return strings_;
}

StatusOr<std::vector<float>> GgufValue::AsFloatArray() const {
  if (!is_array() || (element_type_ != GgufType::kFloat32 &&
                      element_type_ != GgufType::kFloat64)) {
    return TypeError("array of float32 or float64");
  }
  std::vector<float> out(array_size());
  for (uint64_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(
        BitsToDouble(element_type_, LoadBits(element_type_, raw_, i)));
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (!is_array() || !IsGgufInteger(element_type_)) {
    return TypeError("array of integers");
  }
  std::vector<int64_t> out(array_size());
  for (uint64_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = LoadBits(element_type_, raw_, i);
    if (element_type_ == GgufType::kUint64 &&
        bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError("uint64 element " + std::to_string(i) +
                                  " does not fit in int64");
    }
    out[i] = static_cast<int64_t>(bits);
  }
  return out;
}

GgufValue GgufValue::Element(uint64_t i) const {
  KV_CHECK(i < array_size()) << "Element " << i << " of " << array_size();
  switch (element_type_) {
    case GgufType::kString:
      return String(strings_[i]);
    case GgufType::kArray:
      return nested_[i];
    default:
      return FromBits(element_type_, LoadBits(element_type_, raw_, i));
  }
}

namespace {

std::string ScalarString(const GgufValue& v) {
  std::ostringstream os;
  switch (v.type()) {
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      os << *v.AsFloat();
      break;
    case GgufType::kBool:
      os << (*v.AsBool() ? "true" : "false");
      break;
    case GgufType::kString: {
      std::string_view s = v.string_view();
      os << '"' << s.substr(0, 64) << (s.size() > 64 ? "..." : "") << '"';
      break;
    }
    default:
      if (v.AsInt().ok()) {
        os << *v.AsInt();
      } else {
        os << *v.AsUint();
      }
  }
  return os.str();
}

}  // namespace

std::string GgufValue::DebugString(size_t max_elements) const {
  if (!is_array()) return ScalarString(*this);
  std::ostringstream os;
  os << "[" << GgufTypeName(element_type_) << " x " << array_size() << ": ";
  const uint64_t n = std::min<uint64_t>(array_size(), max_elements);
  for (uint64_t i = 0; i < n; ++i) {
    if (i > 0) os << ", ";
    os << Element(i).DebugString(max_elements);
  }
  if (n < array_size()) os << ", ...";
  os << "]";
  return os.str();
}

bool operator==(const GgufValue& a, const GgufValue& b) {
  return a.type_ == b.type_ && a.element_type_ == b.element_type_ &&
         a.bits_ == b.bits_ && a.string_ == b.string_ && a.raw_ == b.raw_ &&
         a.strings_ == b.strings_ && a.nested_ == b.nested_;
}

}  // namespace kvault
