// The request fields that constrain the output to a grammar, as
// llama-server reads them: "grammar" (GBNF), "json_schema", and OpenAI's
// "response_format" ({"type": "text" | "json_object" | "json_schema"}).
#ifndef KVAULT_SERVER_GRAMMAR_FIELDS_H_
#define KVAULT_SERVER_GRAMMAR_FIELDS_H_

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/sampling_params.h"

namespace kvault {

// Sets s->grammar / s->grammar_text from `body`. InvalidArgument (reason
// "invalid_grammar") with the parser's line and column for bad GBNF, the
// converter's path and keyword for an unsupported or malformed schema; both
// grammar and json_schema, or an unknown response_format type, are
// refused by name.
// `ordered` (may be null) is the same body with its keys in the client's
// order: a schema's properties then keep theirs, as llama-server's do.
Status ReadGrammarFields(const nlohmann::json& body, SamplingParams* s,
                         const nlohmann::ordered_json* ordered = nullptr);

}  // namespace kvault

#endif  // KVAULT_SERVER_GRAMMAR_FIELDS_H_
