#include "server/json_fields.h"

#include <cmath>

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
      .WithReason("out_of_range");
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

Status WrongType(std::string_view field, std::string_view expected,
                 const json& got) {
  return InvalidArgumentError("field '" + std::string(field) + "': expected " +
                              std::string(expected) + ", got " +
                              JsonTypeName(got) + " " + Excerpt(got))
      .WithReason("invalid_field");
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
  if (!std::isfinite(d) || std::fabs(d) > 3.0e38) {
    return OutOfRange(key, "not a finite float");
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

StatusOr<json> ParseJsonObject(std::string_view body) {
  for (size_t pos = 0; pos < body.size();) {
    Utf8Decoded d = DecodeUtf8At(body, pos);
    if (d.step != Utf8Step::kValid) {
      return InvalidArgumentError("request body is not valid UTF-8 at byte " +
                                  std::to_string(pos))
          .WithReason("invalid_utf8");
    }
    pos += d.num_bytes;
  }
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
        .WithReason("malformed_json");
  }
  if (!parsed.is_object()) {
    return InvalidArgumentError("request body: expected a JSON object, got " +
                                JsonTypeName(parsed))
        .WithReason("invalid_field");
  }
  return parsed;
}

}  // namespace kvault
