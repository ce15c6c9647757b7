// The request fields that constrain the output to a grammar, as
// llama-server reads them: "grammar" (GBNF), "json_schema", and OpenAI's
// "response_format" ({"type": "text" | "json_object" | "json_schema"}).
#ifndef KVAULT_SERVER_GRAMMAR_FIELDS_H_
#define KVAULT_SERVER_GRAMMAR_FIELDS_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/interrupt.h"
#include "core/status.h"
#include "grammar/grammar.h"
#include "model/sampling_params.h"

namespace kvault {

// What a request's grammar fields ask for, before it is compiled.
struct GrammarSource {
  std::string field;              // the request field errors name
  std::string gbnf;               // GBNF text; empty: `schema` is converted
  nlohmann::ordered_json schema;  // the JSON schema when gbnf is empty
  // Test hook "__kvault_hold_grammar_compile": the compile, once done,
  // waits until it is cancelled (honoured only by a GrammarCompiler made
  // with test hooks on).
  bool hold_for_test = false;
};

struct CompiledGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::string text;  // the GBNF it was compiled from
};

// Compiles `source`: the schema into GBNF, the GBNF into a Grammar, and
// the matcher's first step (a grammar whose very start exceeds the
// matcher's bounds could only end the output at once, outside the
// grammar). Errors as ReadGrammarFields says; Cancelled (reason
// "cancelled") once `interrupt` (may be null) is requested.
StatusOr<CompiledGrammar> CompileGrammarSource(const GrammarSource& source,
                                               const Interrupt* interrupt);

// Returns true when `source` is small enough to compile at once on the
// thread that read it (a few milliseconds at most).
bool IsSmallGrammarSource(const GrammarSource& source);

// How a request's grammar is compiled: by the server's GrammarCompiler
// (which watches the client's connection), or inline when null.
using GrammarCompileFn =
    std::function<StatusOr<CompiledGrammar>(GrammarSource)>;

// Sets s->grammar / s->grammar_text from `body`. InvalidArgument (reason
// "invalid_grammar") with the parser's line and column for bad GBNF, the
// converter's path and keyword for an unsupported or malformed schema
// ("unsupported_schema", "invalid_json_schema"), a grammar past the
// matcher's bounds ("grammar_limit_exceeded"); both grammar and
// json_schema, or an unknown response_format type, are refused by name.
// `ordered` (may be null) is the same body with its keys in the client's
// order: a schema's properties then keep theirs, as llama-server's do.
// `compile` (may be null: inline) compiles what the fields ask for; its
// errors (client gone, server stopping) are returned as they are.
Status ReadGrammarFields(const nlohmann::json& body, SamplingParams* s,
                         const nlohmann::ordered_json* ordered = nullptr,
                         const GrammarCompileFn* compile = nullptr);

}  // namespace kvault

#endif  // KVAULT_SERVER_GRAMMAR_FIELDS_H_
