#include "grammar/schema_converter.h"

#include <cmath>
#include <unordered_set>
#include <utility>

#include "grammar/grammar.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/schema_rules.h"

namespace kvault {
namespace {

using json = nlohmann::ordered_json;

bool IsAnnotation(std::string_view k) {
  // clang-format off
  static const std::set<std::string_view> kAnnotations = {
      "$schema", "$id", "$comment", "title", "description", "default",
      "examples", "deprecated", "readOnly", "writeOnly", "$defs",
      "definitions"};
  // clang-format on
  return kAnnotations.count(k) > 0;
}

bool IsSupported(std::string_view k) {
  // clang-format off
  static const std::set<std::string_view> kSupported = {
      "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
      "properties", "required", "additionalProperties", "items",
      "prefixItems", "minItems", "maxItems", "uniqueItems", "minLength",
      "maxLength", "format", "pattern", "minimum", "maximum",
      "exclusiveMinimum", "exclusiveMaximum"};
  // clang-format on
  return kSupported.count(k) > 0;
}

}  // namespace

std::string ShowPath(const std::string& path) {
  return path.empty() ? "/" : path;
}

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

bool MatchesType(const json& v, const std::string& type) {
  if (type == "integer") {
    // An integral float (2.0) is an integer too; no cast, so no overflow.
    return v.is_number_integer() ||
           (v.is_number_float() &&
            std::floor(v.get<double>()) == v.get<double>());
  }
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

// Keywords from which a missing "type" is inferred.
std::vector<std::string> InferTypes(const json& schema) {
  static const std::vector<std::pair<std::string, std::vector<const char*>>>
      kByType = {
          {"object", {"properties", "additionalProperties", "required"}},
          {"array", {"items", "prefixItems", "minItems", "maxItems"}},
          {"string", {"minLength", "maxLength", "format", "pattern"}},
          {"number",
           {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
      };
  std::vector<std::string> types;
  for (const auto& [type, keys] : kByType) {
    for (const char* k : keys) {
      if (schema.contains(k)) {
        types.push_back(type);
        break;
      }
    }
  }
  return types;
}

// Bounds the recursion of Visit.
class DepthGuard {
 public:
  explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~DepthGuard() { --*depth_; }

 private:
  int* depth_;
};

}  // namespace

Status UnsupportedKeyword(std::string_view keyword, const std::string& path,
                          std::string_view why) {
  std::string msg = "keyword '" + std::string(keyword) + "' at " +
                    ShowPath(path) + " is not supported";
  if (!why.empty()) msg += ": " + std::string(why);
  return InvalidArgumentError(std::move(msg)).WithReason(kReasonUnsupportedSchema);
}

StatusOr<std::string> SchemaConverter::Convert(
    std::optional<Grammar>* compiled) {
  KV_ASSIGN_OR_RETURN(std::string root, Visit(root_, "", "root"));
  std::string out = "root ::= " + root + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  // The result must be a grammar the matcher runs; a schema that loops
  // without consuming input ($ref to itself) is caught here.
  StatusOr<Grammar> check = Grammar::Parse(out, "root", interrupt_);
  if (!check.ok()) {
    if (check.status().code() == StatusCode::kCancelled) return check.status();
    return InvalidArgumentError("the JSON schema gives an unusable grammar: " +
                                std::string(check.status().message()));
  }
  if (compiled != nullptr) compiled->emplace(std::move(*check));
  return out;
}

Status SchemaConverter::CheckKeywords(const json& schema,
                                      const std::string& path) const {
  for (const auto& [key, value] : schema.items()) {
    if (!IsAnnotation(key) && !IsSupported(key)) {
      return UnsupportedKeyword(key, path);
    }
  }
  return Status::Ok();
}

StatusOr<std::string> SchemaConverter::Visit(const json& schema,
                                             const std::string& path,
                                             const std::string& hint) {
  KV_RETURN_IF_ERROR(poller_.Poll());
  DepthGuard guard(&depth_);
  if (depth_ > kMaxDepth) {
    return InvalidArgumentError("schema at " + ShowPath(path) +
                                " is nested deeper than " +
                                std::to_string(kMaxDepth));
  }
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return Fixed("value");
    return InvalidArgumentError("schema 'false' at " + ShowPath(path) +
                                " matches nothing");
  }
  if (!schema.is_object()) {
    return InvalidArgumentError("schema at " + ShowPath(path) +
                                " must be an object or a boolean, got " +
                                std::string(schema.type_name()));
  }
  KV_RETURN_IF_ERROR(CheckKeywords(schema, path));
  // A combinator takes the whole schema: other constraints next to it
  // would have to be intersected, which a grammar cannot express simply.
  for (const char* combinator : {"$ref", "anyOf", "oneOf"}) {
    if (!schema.contains(combinator)) continue;
    for (const auto& [key, value] : schema.items()) {
      if (key != combinator && !IsAnnotation(key)) {
        return UnsupportedKeyword(key, path,
                                  "next to '" + std::string(combinator) + "'");
      }
    }
    if (std::string_view(combinator) == "$ref") {
      if (!schema["$ref"].is_string()) {
        return InvalidArgumentError("$ref at " + ShowPath(path) +
                                    " must be a string");
      }
      return VisitRef(schema["$ref"].get<std::string>(), path);
    }
    return VisitAlternatives(schema[combinator], path + "/" + combinator, hint);
  }
  if (schema.contains("allOf")) return VisitAllOf(schema, path, hint);
  if (schema.contains("enum") || schema.contains("const")) {
    return VisitEnum(schema, path);
  }
  return VisitTypes(schema, path, hint);
}

StatusOr<std::string> SchemaConverter::VisitTypes(const json& schema,
                                                  const std::string& path,
                                                  const std::string& hint) {
  std::vector<std::string> types;
  if (!schema.contains("type")) {
    types = InferTypes(schema);
    if (types.empty()) return Fixed("value");
  } else if (schema["type"].is_string()) {
    types.push_back(schema["type"].get<std::string>());
  } else if (schema["type"].is_array() && !schema["type"].empty()) {
    for (const json& t : schema["type"]) {
      if (!t.is_string()) {
        return InvalidArgumentError("type at " + ShowPath(path) +
                                    " must be a string or list of strings");
      }
      types.push_back(t.get<std::string>());
    }
  } else {
    return InvalidArgumentError("type at " + ShowPath(path) +
                                " must be a string or list of strings");
  }
  if (types.size() == 1) return VisitTyped(schema, types[0], path, hint);
  std::string alts;
  for (const std::string& t : types) {
    KV_ASSIGN_OR_RETURN(std::string e, VisitTyped(schema, t, path, hint));
    alts += (alts.empty() ? "" : " | ") + e;
  }
  return "(" + alts + ")";
}

StatusOr<std::string> SchemaConverter::VisitTyped(const json& schema,
                                                  const std::string& type,
                                                  const std::string& path,
                                                  const std::string& hint) {
  if (type == "object") return ObjectRule(schema, path, hint);
  if (type == "array") return ArrayRule(schema, path, hint);
  if (type == "string") return StringRule(schema, path);
  if (type == "integer") return IntegerRule(schema, path);
  if (type == "number") {
    for (const char* k :
         {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (schema.contains(k)) {
        return UnsupportedKeyword(
            k, path, "bounds are supported on type 'integer' only");
      }
    }
    return Fixed("number");
  }
  if (type == "boolean") return Fixed("boolean");
  if (type == "null") return Fixed("null");
  return InvalidArgumentError("unknown type '" + type + "' at " +
                              ShowPath(path));
}

StatusOr<std::string> SchemaConverter::VisitAlternatives(
    const json& list, const std::string& path, const std::string& hint) {
  if (!list.is_array() || list.empty()) {
    return InvalidArgumentError(ShowPath(path) +
                                " must be a non-empty array of schemas");
  }
  std::string alts;
  for (size_t i = 0; i < list.size(); ++i) {
    KV_ASSIGN_OR_RETURN(std::string e,
                        Visit(list[i], path + "/" + std::to_string(i), hint));
    alts += (alts.empty() ? "" : " | ") + e;
  }
  return "(" + alts + ")";
}

StatusOr<const json*> SchemaConverter::Resolve(const std::string& ref,
                                               const std::string& path) const {
  if (ref.empty() || ref[0] != '#') {
    return InvalidArgumentError("$ref '" + ref + "' at " + ShowPath(path) +
                                " is not supported: only local references "
                                "('#/$defs/name') are");
  }
  try {
    const json::json_pointer ptr(ref.substr(1));
    if (!root_.contains(ptr)) {
      return InvalidArgumentError("$ref '" + ref + "' at " + ShowPath(path) +
                                  " does not resolve");
    }
    return &root_.at(ptr);
  } catch (const json::exception& e) {
    return InvalidArgumentError("$ref '" + ref + "' at " + ShowPath(path) +
                                " is not a valid JSON pointer");
  }
}

StatusOr<std::string> SchemaConverter::VisitRef(const std::string& ref,
                                                const std::string& path) {
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return it->second;
  KV_ASSIGN_OR_RETURN(const json* target, Resolve(ref, path));
  const size_t slash = ref.rfind('/');
  const std::string name =
      FreshName(slash == std::string::npos ? "ref" : ref.substr(slash + 1));
  // Registered before visiting, so a recursive reference finds the name.
  ref_rules_[ref] = name;
  KV_ASSIGN_OR_RETURN(std::string body, Visit(*target, ref.substr(1), name));
  rules_.push_back({name, body});
  return name;
}

StatusOr<std::string> SchemaConverter::VisitEnum(const json& schema,
                                                 const std::string& path) {
  for (const auto& [key, value] : schema.items()) {
    if (key != "enum" && key != "const" && key != "type" &&
        !IsAnnotation(key)) {
      return UnsupportedKeyword(key, path, "next to 'enum' or 'const'");
    }
  }
  json values = json::array();
  if (schema.contains("const")) values.push_back(schema["const"]);
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array()) {
      return InvalidArgumentError("enum at " + ShowPath(path) +
                                  " must be an array");
    }
    for (const json& v : schema["enum"]) values.push_back(v);
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    const json& t = schema["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const json& x : t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  std::string alts;
  std::unordered_set<std::string> seen;  // each value once
  for (const json& v : values) {
    KV_RETURN_IF_ERROR(poller_.Poll());
    bool typed = types.empty();
    for (const std::string& t : types) typed = typed || MatchesType(v, t);
    // const and enum together: the value must be in both.
    if (!typed || (schema.contains("const") && schema.contains("enum") &&
                   v != schema["const"])) {
      continue;
    }
    const std::string text =
        v.dump(-1, ' ', false, json::error_handler_t::replace);
    const std::string lit = GbnfLiteral(text);
    if (seen.insert(lit).second) {
      if (!alts.empty()) alts += " | ";
      alts += lit;
    }
  }
  if (alts.empty()) {
    return InvalidArgumentError("enum/const at " + ShowPath(path) +
                                " allows no value (check 'type')");
  }
  return "(" + alts + ") " + Fixed("ws");
}

std::string SchemaConverter::FreshName(const std::string& hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9');
    if (ok) {
      base.push_back(c);
    } else if (!base.empty() && base.back() != '-') {
      base.push_back('-');
    }
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  if (base.size() > 48) base.resize(48);
  std::string name = base;
  int& n = last_suffix_[base];
  while (IsFixedRuleName(name) || names_.count(name)) {
    name = base + "-" + std::to_string(++n);
  }
  names_.insert(name);
  return name;
}

std::string SchemaConverter::AddRule(const std::string& hint,
                                     const std::string& body) {
  auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  const std::string name = FreshName(hint);
  rules_.push_back({name, body});
  by_body_[body] = name;
  return name;
}

std::string SchemaConverter::Fixed(std::string_view name) {
  const std::string n(name);
  if (names_.insert(n).second) {
    for (std::string_view dep : FixedRuleDeps(name)) Fixed(dep);
    rules_.push_back({n, std::string(FixedRuleBody(name))});
  }
  return n;
}

StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                       const Interrupt* interrupt,
                                       std::optional<Grammar>* compiled) {
  StatusOr<std::string> gbnf = SchemaConverter(schema, interrupt).Convert(
      compiled);
  if (!gbnf.ok() && gbnf.status().reason().empty()) {
    return gbnf.status().WithReason(kReasonInvalidJsonSchema);
  }
  return gbnf;
}

StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  return JsonSchemaToGbnf(schema, nullptr, nullptr);
}

StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema) {
  return JsonSchemaToGbnf(nlohmann::ordered_json::parse(
      schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

std::string JsonObjectGbnf() {
  return SchemaConverter(nlohmann::ordered_json{{"type", "object"}})
      .Convert()
      .value();
}

}  // namespace kvault
