// GgufValue: one GGUF metadata value of any GGUF value type, including
// arrays and arrays of arrays. Arrays keep their elements compactly: numeric
// and bool arrays as their little-endian bytes, string arrays as strings,
// nested arrays as values, so a 150k-entry vocabulary costs what it weighs.
#ifndef KVAULT_MODEL_GGUF_VALUE_H_
#define KVAULT_MODEL_GGUF_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault {

// The GGUF value type ids (a fact of the GGUF format).
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Returns true when `id` is a GGUF value type id.
bool IsValidGgufType(uint32_t id);
// Returns the type's name as the GGUF spec spells it, e.g. "uint32", "array".
std::string_view GgufTypeName(GgufType type);
// Returns the encoded size of a scalar of `type` (0 for string and array).
size_t GgufScalarBytes(GgufType type);
// Returns true for the eight integer types.
bool IsGgufInteger(GgufType type);

class GgufValue {
 public:
  // Constructs uint8 0.
  GgufValue() = default;

  // Returns a uint8 value.
  static GgufValue Uint8(uint8_t v);
  // Returns an int8 value.
  static GgufValue Int8(int8_t v);
  // Returns a uint16 value.
  static GgufValue Uint16(uint16_t v);
  // Returns an int16 value.
  static GgufValue Int16(int16_t v);
  // Returns a uint32 value.
  static GgufValue Uint32(uint32_t v);
  // Returns an int32 value.
  static GgufValue Int32(int32_t v);
  // Returns a uint64 value.
  static GgufValue Uint64(uint64_t v);
  // Returns an int64 value.
  static GgufValue Int64(int64_t v);
  // Returns a float32 value.
  static GgufValue Float32(float v);
  // Returns a float64 value.
  static GgufValue Float64(double v);
  // Returns a bool value.
  static GgufValue Bool(bool v);
  // Returns a string value (any bytes; GGUF strings are not NUL-terminated).
  static GgufValue String(std::string v);
  // Decodes a scalar of numeric or bool `type` from its little-endian
  // encoding; precondition: le_bytes.size() == GgufScalarBytes(type).
  static GgufValue ScalarFromBytes(GgufType type, std::string_view le_bytes);

  // Returns an array of strings.
  static GgufValue StringArray(std::vector<std::string> v);
  // Returns an array of float32.
  static GgufValue Float32Array(std::span<const float> v);
  // Returns an array of int32.
  static GgufValue Int32Array(std::span<const int32_t> v);
  // Returns an array of uint32.
  static GgufValue Uint32Array(std::span<const uint32_t> v);
  // Returns an array of int64.
  static GgufValue Int64Array(std::span<const int64_t> v);
  // An array of a numeric or bool `element_type` from its little-endian
  // encoded bytes (size must be a multiple of the element size).
  static GgufValue RawArray(GgufType element_type, std::string raw);
  // An array of arrays; every element must itself be an array.
  static GgufValue ArrayOfArrays(std::vector<GgufValue> elements);

  // Returns the value's type (kArray for arrays).
  GgufType type() const { return type_; }
  // Returns true for arrays.
  bool is_array() const { return type_ == GgufType::kArray; }
  // Returns the array's element type (meaningless for scalars).
  GgufType element_type() const { return element_type_; }
  // Returns the number of array elements (0 for scalars).
  uint64_t array_size() const;

  // Scalar reads: InvalidArgument names the expected and the actual type.
  // Returns any integer type's value; fails when negative.
  StatusOr<uint64_t> AsUint() const;
  // Returns any integer type's value; fails when above INT64_MAX.
  StatusOr<int64_t> AsInt() const;
  // Returns a float32 or float64 value.
  StatusOr<double> AsFloat() const;
  // Returns a bool value.
  StatusOr<bool> AsBool() const;
  // Returns a copy of a string value.
  StatusOr<std::string> AsString() const;
  // Returns the raw scalar payload: an integer sign- or zero-extended to 64
  // bits, a bool as 0/1, or a float's IEEE bits (exact, NaN payloads too);
  // its low GgufScalarBytes(type()) bytes are the value's GGUF encoding.
  uint64_t scalar_bits() const { return bits_; }
  // Returns the string's bytes without copying; precondition: type() is
  // kString.
  std::string_view string_view() const;

  // Array reads: InvalidArgument when not an array of the right kind.
  // Returns a copy of a string array.
  StatusOr<std::vector<std::string>> AsStringArray() const;
  // Returns an array of float32 or float64 elements as floats.
  StatusOr<std::vector<float>> AsFloatArray() const;
  // Returns an array of any integer type (uint64 above INT64_MAX fails).
  StatusOr<std::vector<int64_t>> AsIntArray() const;
  // Returns element `i` (< array_size()) as a scalar value, or the nested
  // array for arrays of arrays.
  GgufValue Element(uint64_t i) const;
  // String-array elements without copying (empty for other types).
  std::span<const std::string> strings() const { return strings_; }
  // Little-endian element bytes of a numeric/bool array (empty otherwise).
  std::string_view raw_elements() const { return raw_; }
  // Nested arrays of an array of arrays (empty otherwise).
  std::span<const GgufValue> nested() const { return nested_; }

  // Returns a short human-readable rendering; arrays show their type, size
  // and up to `max_elements` leading elements.
  std::string DebugString(size_t max_elements = 8) const;

  // Deep equality: same type, element type and contents (floats bitwise).
  friend bool operator==(const GgufValue& a, const GgufValue& b);

 private:
  static GgufValue FromBits(GgufType type, uint64_t bits);
  Status TypeError(std::string_view expected) const;

  GgufType type_ = GgufType::kUint8;
  GgufType element_type_ = GgufType::kUint8;
  uint64_t bits_ = 0;   // scalar payload: integer (sign-extended), bool, or
                        // the IEEE bits of a float32 / float64
  std::string string_;  // kString
  std::string raw_;     // numeric/bool array elements
  std::vector<std::string> strings_;  // string array elements
  std::vector<GgufValue> nested_;     // array-of-arrays elements
};

}  // namespace kvault

#endif  // KVAULT_MODEL_GGUF_VALUE_H_
