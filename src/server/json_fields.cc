#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include "model/unicode_text.h"

namespace kvault {
namespace {

using nlohmann::json;

// Returns a short rendering of `value` for error messages.
std::string Excerpt(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 40;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

Status OutOfRange(std::string_view field, const std::string& what) {
  return InvalidArgumentError("field '" + std::string(field) + "': " + what)
      .WithReason(kReasonOutOfRange);
}

}  // namespace

std::string JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return "string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::null:
      return "null";
    default:
      return "value";
  }
}

const json* FindField(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status UnsupportedField(std::string_view field, std::string_view why) {
  return InvalidArgumentError("field '" + std::string(field) +
                              "' is not supported: " + std::string(why))
      .WithReason(kReasonUnsupportedField);
}

Status WrongType(std::string_view field, std::string_view expected,
                 const json& got) {
  return InvalidArgumentError("field '" + std::string(field) + "': expected " +
                              std::string(expected) + ", got " +
                              JsonTypeName(got) + " " + Excerpt(got))
      .WithReason(kReasonInvalidField);
}

Status ReadBool(const json& obj, std::string_view key, bool* out) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
  *out = v->get<bool>();
  return Status::Ok();
}

Status ReadInt(const json& obj, std::string_view key, int64_t lo, int64_t hi,
               int64_t* out) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return Status::Ok();
  int64_t value = 0;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return OutOfRange(key, std::to_string(u) + " is above the maximum " +
                                 std::to_string(hi));
    }
    value = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    // 2^63 bounds the conversion; larger values are out of range anyway.
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.2e18) {
      return WrongType(key, "an integer", *v);
    }
    value = static_cast<int64_t>(d);
  } else {
    return WrongType(key, "an integer", *v);
  }
  if (value < lo || value > hi) {
    return OutOfRange(key, std::to_string(value) + " is outside [" +
                               std::to_string(lo) + ", " + std::to_string(hi) +
                               "]");
  }
  *out = value;
  return Status::Ok();
}

Status ReadFloat(const json& obj, std::string_view key, float* out) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number()) return WrongType(key, "a number", *v);
  double d = v->get<double>();
  if (!std::isfinite(d)) return OutOfRange(key, "not a finite number");
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (std::fabs(d) > kFloatMax) {
    return OutOfRange(key, v->dump() +
                               " is outside the float range "
                               "[-3.4028235e+38, 3.4028235e+38]");
  }
  *out = static_cast<float>(d);
  return Status::Ok();
}

Status ReadString(const json& obj, std::string_view key, std::string* out) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return WrongType(key, "a string", *v);
  *out = v->get<std::string>();
  return Status::Ok();
}

Status CheckJsonShape(std::string_view body, const JsonLimits& limits) {
  // One pass over the bytes outside strings: brackets give the depth and
  // each container or comma starts at most one more value. A body over
  // either limit is refused before the parser allocates anything.
  uint32_t depth = 0;
  uint64_t num_values = 1;
  bool in_string = false;
  for (size_t pos = 0; pos < body.size(); ++pos) {
    const char c = body[pos];
    if (in_string) {
      if (c == '\\') {
        ++pos;  // the escaped byte cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth) {
        return InvalidArgumentError(
                   "JSON body nests deeper than " +
                   std::to_string(limits.max_depth) + " levels at byte " +
                   std::to_string(pos))
            .WithReason(kReasonJsonTooDeep);
      }
    } else if (c == ']' || c == '}') {
      depth -= depth > 0 ? 1 : 0;  // unbalanced: the parser reports it
    } else if (c == ',' && ++num_values > limits.max_values) {
      return InvalidArgumentError("JSON body holds more than " +
                                  std::to_string(limits.max_values) +
                                  " values (at byte " + std::to_string(pos) +
                                  ")")
          .WithReason(kReasonJsonTooLarge);
    }
  }
  return Status::Ok();
}

StatusOr<json> ParseJsonObject(std::string_view body) {
  for (size_t pos = 0; pos < body.size();) {
    Utf8Decoded d = DecodeUtf8At(body, pos);
    if (d.step != Utf8Step::kValid) {
      return InvalidArgumentError("request body is not valid UTF-8 at byte " +
                                  std::to_string(pos))
          .WithReason(kReasonInvalidUtf8);
    }
    pos += d.num_bytes;
  }
  KV_RETURN_IF_ERROR(CheckJsonShape(body, JsonLimits()));
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // Parse again with exceptions only to get the parser's position.
    std::string detail;
    try {
      json ignored = json::parse(body);
      (void)ignored;
    } catch (const json::exception& e) {
      detail = e.what();
    }
    return InvalidArgumentError("malformed JSON body (" +
                                std::to_string(body.size()) +
                                " bytes): " + detail)
        .WithReason(kReasonMalformedJson);
  }
  if (!parsed.is_object()) {
    return InvalidArgumentError("request body: expected a JSON object, got " +
                                JsonTypeName(parsed))
        .WithReason(kReasonInvalidField);
  }
  return parsed;
}

}  // namespace kvault
