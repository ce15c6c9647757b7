// SchemaConverter: the state of one JSON schema -> GBNF conversion. Each
// schema node becomes a GBNF expression; named rules are emitted for
// objects, arrays, $ref targets and the fixed primitives, deduplicated by
// body. Every value expression ends with the `ws` rule, so whitespace
// after a token is handled in one place.
#ifndef KVAULT_GRAMMAR_SCHEMA_CONVERTER_H_
#define KVAULT_GRAMMAR_SCHEMA_CONVERTER_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/interrupt.h"
#include "core/status_or.h"
#include "grammar/grammar.h"

namespace kvault {

class SchemaConverter {
 public:
  // Deepest nesting of schemas followed (the converter is recursive).
  static constexpr int kMaxDepth = 64;

  // `interrupt` (may be null) stops the conversion with Cancelled.
  explicit SchemaConverter(const nlohmann::ordered_json& root,
                           const Interrupt* interrupt = nullptr)
      : root_(root),
        interrupt_(interrupt),
        poller_(interrupt, "the JSON schema conversion") {}

  // Converts the root schema into the text of a GBNF grammar, checked by
  // compiling it; the compiled grammar goes to `compiled` when not null.
  StatusOr<std::string> Convert(std::optional<Grammar>* compiled = nullptr);

 private:
  using json = nlohmann::ordered_json;

  StatusOr<std::string> Visit(const json& schema, const std::string& path,
                              const std::string& hint);
  // The schema by its "type" (a name, a list, or inferred from keywords).
  StatusOr<std::string> VisitTypes(const json& schema, const std::string& path,
                                   const std::string& hint);
  StatusOr<std::string> VisitTyped(const json& schema, const std::string& type,
                                   const std::string& path,
                                   const std::string& hint);
  StatusOr<std::string> VisitAlternatives(const json& list,
                                          const std::string& path,
                                          const std::string& hint);
  StatusOr<std::string> VisitAllOf(const json& schema, const std::string& path,
                                   const std::string& hint);
  StatusOr<std::string> VisitRef(const std::string& ref,
                                 const std::string& path);
  StatusOr<std::string> VisitEnum(const json& schema, const std::string& path);
  struct ObjectProp {
    std::string kv;  // "\"key\"" ws ":" ws value
    bool required;
  };
  StatusOr<std::vector<ObjectProp>> ObjectProperties(const json& schema,
                                                     const std::string& path,
                                                     const std::string& hint);
  StatusOr<std::string> ObjectRule(const json& schema, const std::string& path,
                                   const std::string& hint);
  StatusOr<std::string> ArrayRule(const json& schema, const std::string& path,
                                  const std::string& hint);
  StatusOr<std::string> StringRule(const json& schema, const std::string& path);
  StatusOr<std::string> IntegerRule(const json& schema,
                                    const std::string& path);
  Status CheckKeywords(const json& schema, const std::string& path) const;
  StatusOr<const json*> Resolve(const std::string& ref,
                                const std::string& path) const;

  // Returns the name of a new rule with `body` (or of an existing rule with
  // the same body); the name derives from `hint`.
  std::string AddRule(const std::string& hint, const std::string& body);
  // Returns a fresh rule name derived from `hint`.
  std::string FreshName(const std::string& hint);
  // Emits fixed rule `name` and its dependencies once; returns `name`.
  std::string Fixed(std::string_view name);

  const nlohmann::ordered_json& root_;
  const Interrupt* const interrupt_;
  InterruptPoller poller_;  // asked once per schema node and enum value
  int depth_ = 0;
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body
  std::map<std::string, std::string> by_body_;
  std::set<std::string> names_;
  // Per FreshName base, the last suffix it tried: a schema with thousands
  // of rules of one hint gets fresh names in linear time, not quadratic.
  std::unordered_map<std::string, int> last_suffix_;
  std::map<std::string, std::string> ref_rules_;  // "$ref" -> rule name
};

// Returns `path` for messages ("/" for the root).
std::string ShowPath(const std::string& path);
// Returns `key` as one JSON pointer token (RFC 6901: ~ -> ~0, / -> ~1).
std::string PointerToken(const std::string& key);

// Returns the error "keyword 'K' at P is not supported[: why]".
Status UnsupportedKeyword(std::string_view keyword, const std::string& path,
                          std::string_view why = "");

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_SCHEMA_CONVERTER_H_
