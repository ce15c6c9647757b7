#include "server/grammar_fields.h"

#include <memory>
#include <string>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_to_gbnf.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

Status InvalidGrammar(const std::string& field, const Status& why) {
  return InvalidArgumentError("field '" + field + "': " +
                              std::string(why.message()))
      .WithReason(kReasonInvalidGrammar);
}

// The schema a json_schema or response_format asks for; nullopt-like
// null json when none.
StatusOr<json> SchemaOf(const json& body, std::string* field) {
  const json* schema = FindField(body, "json_schema");
  if (schema != nullptr) {
    *field = "json_schema";
    return *schema;
  }
  const json* format = FindField(body, "response_format");
  if (format == nullptr) return json();
  if (!format->is_object()) {
    return WrongType("response_format", "an object {\"type\": ...}", *format);
  }
  std::string type = "text";
  KV_RETURN_IF_ERROR(ReadString(*format, "type", &type));
  if (type == "text") return json();
  if (type == "json_object") {
    // OpenAI: a JSON object; llama-server's extension: its "schema".
    *field = "response_format.schema";
    const json* s = FindField(*format, "schema");
    return s == nullptr ? json{{"type", "object"}} : *s;
  }
  if (type == "json_schema") {
    *field = "response_format.json_schema.schema";
    const json* spec = FindField(*format, "json_schema");
    const json* s = spec == nullptr ? nullptr : FindField(*spec, "schema");
    return s == nullptr ? json::object() : *s;
  }
  return InvalidArgumentError(
             "field 'response_format.type': expected \"text\", "
             "\"json_object\" or \"json_schema\", got \"" + type + "\"")
      .WithReason(kReasonInvalidField);
}

// Returns the value at `path` ("a.b.c") of `root`, or null.
const nlohmann::ordered_json* OrderedAt(const nlohmann::ordered_json& root,
                                        const std::string& path) {
  const nlohmann::ordered_json* node = &root;
  size_t i = 0;
  while (node != nullptr && i <= path.size()) {
    size_t j = path.find('.', i);
    if (j == std::string::npos) j = path.size();
    auto it = node->is_object() ? node->find(path.substr(i, j - i))
                                : node->end();
    node = node->is_object() && it != node->end() ? &*it : nullptr;
    i = j + 1;
  }
  return node;
}

}  // namespace

Status ReadGrammarFields(const json& body, SamplingParams* s,
                         const nlohmann::ordered_json* ordered) {
  std::string field;
  KV_ASSIGN_OR_RETURN(json schema, SchemaOf(body, &field));
  std::string gbnf;
  KV_RETURN_IF_ERROR(ReadString(body, "grammar", &gbnf));
  if (!gbnf.empty() && FindField(body, "json_schema") != nullptr) {
    return InvalidArgumentError(
               "fields 'grammar' and 'json_schema': either can be given, "
               "not both")
        .WithReason(kReasonInvalidField);
  }
  if (gbnf.empty() && !schema.is_null()) {
    if (!schema.is_object() && !schema.is_boolean()) {
      return WrongType(field, "a JSON schema (an object)", schema);
    }
    const nlohmann::ordered_json* in_order =
        ordered != nullptr ? OrderedAt(*ordered, field) : nullptr;
    StatusOr<std::string> converted = in_order != nullptr
                                          ? JsonSchemaToGbnf(*in_order)
                                          : JsonSchemaToGbnf(schema);
    if (!converted.ok()) return InvalidGrammar(field, converted.status());
    gbnf = std::move(*converted);
  } else if (!gbnf.empty()) {
    field = "grammar";
  }
  if (gbnf.empty()) return Status::Ok();
  StatusOr<Grammar> grammar = Grammar::Parse(gbnf);
  if (!grammar.ok()) return InvalidGrammar(field, grammar.status());
  s->grammar = std::make_shared<const Grammar>(std::move(*grammar));
  // A grammar whose very start exceeds the matcher's bounds could only
  // end the output at once, outside the grammar: refuse it now.
  const GrammarMatcher probe(s->grammar);
  if (!probe.status().ok()) {
    return InvalidArgumentError("field '" + field + "': " +
                                std::string(probe.status().message()))
        .WithReason(kReasonGrammarLimitExceeded);
  }
  s->grammar_text = std::move(gbnf);
  return Status::Ok();
}

}  // namespace kvault
