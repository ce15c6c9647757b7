#include "server/grammar_fields.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_to_gbnf.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

// The refusal of a grammar field whose compile failed with `why`: the
// field named, the converter's reason kept (unsupported_schema,
// invalid_json_schema), else invalid_grammar; a stopped compile unchanged.
Status Refusal(const std::string& field, const Status& why) {
  if (why.code() == StatusCode::kCancelled) return why;
  const std::string reason =
      why.reason().empty() ? kReasonInvalidGrammar : std::string(why.reason());
  return InvalidArgumentError("field '" + field + "': " +
                              std::string(why.message()))
      .WithReason(reason);
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

// Returns true when `root` has at most `max_nodes` values (walked without
// recursion, stopping as soon as the count is passed).
bool HasAtMostNodes(const nlohmann::ordered_json& root, size_t max_nodes) {
  std::vector<const nlohmann::ordered_json*> todo = {&root};
  size_t seen = 0;
  while (!todo.empty()) {
    const nlohmann::ordered_json* node = todo.back();
    todo.pop_back();
    if (++seen > max_nodes) return false;
    if (node->is_structured()) {
      for (const auto& child : *node) todo.push_back(&child);
    }
  }
  return true;
}

// The source the grammar fields of `body` ask for; an empty field: none.
StatusOr<GrammarSource> SourceOf(const json& body,
                                 const nlohmann::ordered_json* ordered) {
  GrammarSource source;
  KV_ASSIGN_OR_RETURN(json schema, SchemaOf(body, &source.field));
  KV_RETURN_IF_ERROR(ReadString(body, "grammar", &source.gbnf));
  KV_RETURN_IF_ERROR(
      ReadBool(body, "__kvault_hold_grammar_compile", &source.hold_for_test));
  if (!source.gbnf.empty() && FindField(body, "json_schema") != nullptr) {
    return InvalidArgumentError(
               "fields 'grammar' and 'json_schema': either can be given, "
               "not both")
        .WithReason(kReasonInvalidField);
  }
  if (!source.gbnf.empty()) {
    source.field = "grammar";
    return source;
  }
  if (schema.is_null()) {
    source.field.clear();
    return source;
  }
  if (!schema.is_object() && !schema.is_boolean()) {
    return WrongType(source.field, "a JSON schema (an object)", schema);
  }
  const nlohmann::ordered_json* in_order =
      ordered != nullptr ? OrderedAt(*ordered, source.field) : nullptr;
  source.schema = in_order != nullptr
                      ? *in_order
                      : nlohmann::ordered_json::parse(schema.dump(
                            -1, ' ', false, json::error_handler_t::replace));
  return source;
}

}  // namespace

StatusOr<CompiledGrammar> CompileGrammarSource(const GrammarSource& source,
                                               const Interrupt* interrupt) {
  CompiledGrammar out;
  std::optional<Grammar> grammar;
  if (source.gbnf.empty()) {
    StatusOr<std::string> converted =
        JsonSchemaToGbnf(source.schema, interrupt, &grammar);
    if (!converted.ok()) return Refusal(source.field, converted.status());
    out.text = std::move(*converted);
  } else {
    StatusOr<Grammar> parsed = Grammar::Parse(source.gbnf, "root", interrupt);
    if (!parsed.ok()) return Refusal(source.field, parsed.status());
    grammar.emplace(std::move(*parsed));
    out.text = source.gbnf;
  }
  out.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  const GrammarMatcher probe(out.grammar);
  if (!probe.status().ok()) {
    return InvalidArgumentError("field '" + source.field + "': " +
                                std::string(probe.status().message()))
        .WithReason(kReasonGrammarLimitExceeded);
  }
  return out;
}

bool IsSmallGrammarSource(const GrammarSource& source) {
  constexpr size_t kSmallGbnfBytes = 16 << 10;
  constexpr size_t kSmallSchemaNodes = 2000;
  if (!source.gbnf.empty()) return source.gbnf.size() <= kSmallGbnfBytes;
  return HasAtMostNodes(source.schema, kSmallSchemaNodes);
}

Status ReadGrammarFields(const json& body, SamplingParams* s,
                         const nlohmann::ordered_json* ordered,
                         const GrammarCompileFn* compile) {
  KV_ASSIGN_OR_RETURN(GrammarSource source, SourceOf(body, ordered));
  if (source.field.empty()) return Status::Ok();
  StatusOr<CompiledGrammar> compiled =
      compile != nullptr ? (*compile)(std::move(source))
                         : CompileGrammarSource(source, nullptr);
  if (!compiled.ok()) return compiled.status();
  s->grammar = std::move(compiled->grammar);
  s->grammar_text = std::move(compiled->text);
  return Status::Ok();
}

}  // namespace kvault
