// Typed, strict access to the fields of a JSON request body. Every error is
// an InvalidArgument naming the field, the expected type or range and what
// was sent, with reason "invalid_field" (wrong type) or "out_of_range".
// An absent field or an explicit null leaves the output untouched (the
// default applies), as in llama-server.
#ifndef KVAULT_SERVER_JSON_FIELDS_H_
#define KVAULT_SERVER_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status_or.h"

namespace kvault {

// Returns "string", "integer", "number", "boolean", "array", "object" or
// "null".
std::string JsonTypeName(const nlohmann::json& value);

// Returns the value of `key` in object `obj`, or nullptr when absent or null.
const nlohmann::json* FindField(const nlohmann::json& obj,
                                std::string_view key);

// Returns InvalidArgument "field '<field>': expected <expected>, got <type>
// <value excerpt>" (reason "invalid_field").
// Returns InvalidArgument (reason "unsupported_field"): "field 'F' is not
// supported: WHY", for a field an API defines that kvault cannot honour.
Status UnsupportedField(std::string_view field, std::string_view why);

Status WrongType(std::string_view field, std::string_view expected,
                 const nlohmann::json& got);

// Reads a boolean field.
Status ReadBool(const nlohmann::json& obj, std::string_view key, bool* out);
// Reads an integer field within [lo, hi]; an integral float (e.g. 8.0) is
// accepted.
Status ReadInt(const nlohmann::json& obj, std::string_view key, int64_t lo,
               int64_t hi, int64_t* out);
// Reads a finite number field (integers accepted).
Status ReadFloat(const nlohmann::json& obj, std::string_view key, float* out);
// Reads a string field.
Status ReadString(const nlohmann::json& obj, std::string_view key,
                  std::string* out);

// Bounds on a request body's JSON, checked before it is parsed so that a
// hostile body costs no more memory than its bytes.
struct JsonLimits {
  uint32_t max_depth = 128;        // nested arrays and objects
  uint64_t max_values = 1u << 20;  // values in all (a token-id prompt counts
                                   // one per token)
};

// Checks `body`'s nesting depth (reason "json_too_deep") and number of
// values (reason "json_too_large") without parsing it; each error names the
// limit and the byte offset. Malformed JSON passes: the parser reports it.
Status CheckJsonShape(std::string_view body, const JsonLimits& limits);

// Parses a request body: it must be valid UTF-8 (reason "invalid_utf8",
// naming the byte offset), within JsonLimits' defaults (CheckJsonShape),
// well-formed JSON (reason "malformed_json", with the parser's position)
// and an object (reason "invalid_field").
StatusOr<nlohmann::json> ParseJsonObject(std::string_view body);

}  // namespace kvault

#endif  // KVAULT_SERVER_JSON_FIELDS_H_
