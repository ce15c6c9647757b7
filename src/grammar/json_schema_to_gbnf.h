// JSON schema -> GBNF, for response_format / json_schema constrained
// decoding. The grammar's sentences are JSON texts valid under the schema
// (a subset of them: bounded whitespace, numbers of at most 16 digits,
// properties in the order the schema lists them).
#ifndef KVAULT_GRAMMAR_JSON_SCHEMA_TO_GBNF_H_
#define KVAULT_GRAMMAR_JSON_SCHEMA_TO_GBNF_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/interrupt.h"
#include "core/status_or.h"
#include "grammar/grammar.h"

namespace kvault {

// Returns a GBNF grammar (start rule "root") for `schema`; properties keep
// the order of `schema` (parse it as ordered_json to keep the client's).
// Supported: type (a name or a list), properties / required /
// additionalProperties (false, true or a schema; absent means false when
// properties are given, any value otherwise), enum, const, items, prefixItems,
// minItems, maxItems, minLength, maxLength, format (date, time, date-time,
// uuid), minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers,
// anyOf, oneOf (as anyOf), allOf (objects are merged), local $ref into
// $defs / definitions / any "#/..." pointer (recursion allowed), and
// {} / true for any value. Any other keyword is an InvalidArgument
// "keyword 'K' at /path is not supported" (reason "unsupported_schema";
// other errors have reason "invalid_json_schema"); annotations (title,
// description, default, examples, $schema, $id, $comment, ...) are
// ignored. Callers prefix their field name with Status::WithContext.
StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
// As above, stopping with Cancelled (reason "cancelled") once `interrupt`
// (may be null) is requested; the grammar compiled to check the result goes
// to `compiled` when not null, so that callers need not compile it again.
StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                       const Interrupt* interrupt,
                                       std::optional<Grammar>* compiled);
// As above; nlohmann::json keeps object keys sorted, so properties come in
// alphabetical order.
StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema);

// Returns the grammar for response_format {"type": "json_object"}: any
// JSON object.
std::string JsonObjectGbnf();

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_JSON_SCHEMA_TO_GBNF_H_
