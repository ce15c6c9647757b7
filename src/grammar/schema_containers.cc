// SchemaConverter's rules for objects, arrays, strings and integers, and
// the merge of allOf.
#include <cmath>
#include <unordered_set>
#include <utility>

#include "grammar/gbnf_parser.h"
#include "grammar/regex_to_gbnf.h"
#include "grammar/schema_converter.h"
#include "grammar/schema_rules.h"

namespace kvault {
namespace {

using json = nlohmann::ordered_json;

// Joins the non-empty parts with spaces.
std::string Seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    out += (out.empty() ? "" : " ") + p;
  }
  return out;
}

// A repetition suffix for [lo, hi] copies (hi < 0: unbounded).
std::string Rep(int64_t lo, int64_t hi) {
  if (hi < 0) {
    return lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}";
  }
  if (lo == hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

// Reads a count keyword (minItems, maxLength, ...): absent -> `dflt`.
Status ReadCount(const json& schema, const char* key, const std::string& path,
                 int64_t dflt, int64_t* out) {
  *out = dflt;
  if (!schema.contains(key)) return Status::Ok();
  const json& v = schema[key];
  if (!v.is_number_unsigned() &&
      !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return InvalidArgumentError(std::string(key) + " at " + ShowPath(path) +
                                " must be a non-negative integer");
  }
  const uint64_t n = v.get<uint64_t>();
  if (n > GbnfParser::kMaxRepetition) {
    return UnsupportedKeyword(key, path,
                              "the value " + std::to_string(n) +
                                  " exceeds the limit of " +
                                  std::to_string(GbnfParser::kMaxRepetition));
  }
  *out = static_cast<int64_t>(n);
  return Status::Ok();
}

std::string Quote() { return "\"\\\"\""; }  // the GBNF literal "\""

// Adds an allOf part (an object schema) to `merged`: properties are
// united (a later schema of the same property wins), required lists are
// united, additionalProperties false anywhere closes the result.
Status MergeObjectPart(const json& part, const std::string& at, json* merged) {
  if (!part.is_object()) {
    return InvalidArgumentError("allOf part at " + ShowPath(at) +
                                " must be an object schema");
  }
  json& required = (*merged)["required"];
  for (const auto& [key, v] : part.items()) {
    if (key == "type" && v == "object") continue;
    if (key == "properties" && v.is_object()) {
      for (const auto& [name, sub] : v.items()) {
        (*merged)["properties"][name] = sub;
      }
    } else if (key == "required" && v.is_array()) {
      for (const json& r : v) {
        if (std::find(required.begin(), required.end(), r) == required.end()) {
          required.push_back(r);
        }
      }
    } else if (key == "additionalProperties" && v == false) {
      (*merged)["additionalProperties"] = false;
    } else if (key != "title" && key != "description" && key != "$defs" &&
               key != "definitions" && key != "$comment") {
      return UnsupportedKeyword(key, at,
                                "inside allOf, only object schemas "
                                "(properties, required) are merged");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<SchemaConverter::ObjectProp>>
SchemaConverter::ObjectProperties(const json& schema, const std::string& path,
                                  const std::string& hint) {
  static const json kEmpty = json::object();
  const json& props =
      schema.contains("properties") ? schema["properties"] : kEmpty;
  if (!props.is_object()) {
    return InvalidArgumentError("properties at " + ShowPath(path) +
                                " must be an object");
  }
  std::vector<std::string> required;
  if (schema.contains("required")) {
    for (const json& r : schema["required"]) {
      if (!r.is_string()) {
        return InvalidArgumentError("required at " + ShowPath(path) +
                                    " must be an array of strings");
      }
      required.push_back(r.get<std::string>());
    }
  }
  const std::unordered_set<std::string> required_set(required.begin(),
                                                     required.end());
  std::vector<ObjectProp> list;
  const std::string ws = Fixed("ws");
  auto add = [&](const std::string& key, const std::string& value) {
    const std::string quoted =
        json(key).dump(-1, ' ', false, json::error_handler_t::replace);
    list.push_back(
        {Seq({GbnfLiteral(quoted), ws, "\":\"", ws, value}),
         required_set.count(key) > 0});
  };
  for (const auto& [key, sub] : props.items()) {
    KV_ASSIGN_OR_RETURN(std::string value,
                        Visit(sub, path + "/properties/" + PointerToken(key),
                              hint + "-" + key));
    add(key, value);
  }
  // Required but not described: any value.
  for (const std::string& key : required) {
    if (!props.contains(key)) add(key, Fixed("value"));
  }
  return list;
}

StatusOr<std::string> SchemaConverter::ObjectRule(const json& schema,
                                                  const std::string& path,
                                                  const std::string& hint) {
  KV_ASSIGN_OR_RETURN(std::vector<ObjectProp> list,
                      ObjectProperties(schema, path, hint));
  const std::string ws = Fixed("ws");
  std::string extra;  // the key-value rule of additional properties
  const bool open = schema.contains("additionalProperties")
                        ? !(schema["additionalProperties"].is_boolean() &&
                            !schema["additionalProperties"].get<bool>())
                        : !schema.contains("properties");
  if (open) {
    std::string value = Fixed("value");
    if (schema.contains("additionalProperties") &&
        !schema["additionalProperties"].is_boolean()) {
      KV_ASSIGN_OR_RETURN(
          value, Visit(schema["additionalProperties"],
                       path + "/additionalProperties", hint + "-additional"));
    }
    extra = AddRule(hint + "-kv", Seq({Fixed("string"), "\":\"", ws, value}));
  }
  // rest[i]: properties i.. once one was written (each after a comma);
  // first[i]: properties i.. when none was written yet.
  const size_t n = list.size();
  size_t optional_prefix = 0;  // properties before the first required one
  while (optional_prefix < n && !list[optional_prefix].required) {
    ++optional_prefix;
  }
  std::vector<std::string> rest(n + 1), first(n + 1);
  rest[n] = extra.empty() ? "" : "( \",\" " + ws + " " + extra + " )*";
  first[n] = extra.empty() ? "" : "( " + Seq({extra, rest[n]}) + " )?";
  for (size_t i = n; i-- > 0;) {
    const std::string comma_kv = Seq({"\",\"", ws, list[i].kv});
    const std::string piece =
        list[i].required ? comma_kv : "( " + comma_kv + " )?";
    rest[i] = Seq({piece, rest[i + 1]});
    if (!rest[i].empty() && i > 0) rest[i] = AddRule(hint + "-rest", rest[i]);
    const std::string with = Seq({list[i].kv, rest[i + 1]});
    first[i] =
        list[i].required ? with : "( " + with + " | " + first[i + 1] + " )";
    // first[i] is reachable only when every property before i is optional.
    if (i > 0 && i <= optional_prefix) {
      first[i] = AddRule(hint + "-from", first[i]);
    }
  }
  return AddRule(hint, Seq({"\"{\"", ws, first[0], "\"}\"", ws}));
}

StatusOr<std::string> SchemaConverter::ArrayRule(const json& schema,
                                                 const std::string& path,
                                                 const std::string& hint) {
  if (schema.contains("uniqueItems") && !(schema["uniqueItems"].is_boolean() &&
                                          !schema["uniqueItems"].get<bool>())) {
    return UnsupportedKeyword("uniqueItems", path, "only false is");
  }
  int64_t min = 0, max = -1;
  KV_RETURN_IF_ERROR(ReadCount(schema, "minItems", path, 0, &min));
  KV_RETURN_IF_ERROR(ReadCount(schema, "maxItems", path, -1, &max));
  // The tuple: prefixItems, or items as an array (the form before 2020-12).
  const bool items_tuple =
      schema.contains("items") && schema["items"].is_array();
  if (items_tuple && schema.contains("prefixItems")) {
    return UnsupportedKeyword("items", path,
                              "an array of schemas next to 'prefixItems'");
  }
  const char* tuple_key = items_tuple ? "items" : "prefixItems";
  std::vector<std::string> prefix;
  if (schema.contains(tuple_key)) {
    const json& p = schema[tuple_key];
    if (!p.is_array()) {
      return InvalidArgumentError("prefixItems at " + ShowPath(path) +
                                  " must be an array");
    }
    for (size_t i = 0; i < p.size(); ++i) {
      KV_ASSIGN_OR_RETURN(
          std::string e,
          Visit(p[i], path + "/" + tuple_key + "/" + std::to_string(i),
                hint + "-" + std::to_string(i)));
      prefix.push_back(e);
    }
  }
  std::string item;  // "" when no further items are allowed
  if (schema.contains("items") && !items_tuple) {
    if (!schema["items"].is_boolean() || schema["items"].get<bool>()) {
      KV_ASSIGN_OR_RETURN(
          item, Visit(schema["items"], path + "/items", hint + "-item"));
    }
  } else if (prefix.empty() && !items_tuple) {
    item = Fixed("value");
  }  // a tuple without items: exactly the tuple, as llama.cpp does
  const int64_t k = static_cast<int64_t>(prefix.size());
  if (max >= 0 && (max < min || max < k) && !(k == 0 && max >= min)) {
    return InvalidArgumentError("array at " + ShowPath(path) +
                                " allows no length (minItems/maxItems/"
                                "prefixItems conflict)");
  }
  const std::string ws = Fixed("ws");
  const int64_t lo = std::max<int64_t>(0, min - k);
  const int64_t hi = max < 0 ? -1 : max - k;
  if (item.empty() && lo > 0) {
    return InvalidArgumentError("array at " + ShowPath(path) +
                                " needs more items than it allows");
  }
  const std::string more = Seq({"\",\"", ws, item});
  std::string body;
  if (k > 0) {
    std::string seq = prefix[0];
    for (int64_t i = 1; i < k; ++i) seq = Seq({seq, "\",\"", ws, prefix[i]});
    const std::string tail =
        (item.empty() || hi == 0) ? "" : "( " + more + " )" + Rep(lo, hi);
    body = Seq({seq, tail});
  } else if (!item.empty() && hi != 0) {
    if (lo == 0) {
      const std::string tail =
          hi == 1 ? "" : "( " + more + " )" + Rep(0, hi < 0 ? -1 : hi - 1);
      body = "( " + Seq({item, tail}) + " )?";
    } else {
      const std::string tail =
          lo == 1 && hi == 1
              ? ""
              : "( " + more + " )" + Rep(lo - 1, hi < 0 ? -1 : hi - 1);
      body = Seq({item, tail});
    }
  }
  return AddRule(hint, Seq({"\"[\"", ws, body, "\"]\"", ws}));
}

StatusOr<std::string> SchemaConverter::StringRule(const json& schema,
                                                  const std::string& path) {
  if (schema.contains("format")) {
    for (const char* k : {"minLength", "maxLength", "pattern"}) {
      if (schema.contains(k)) {
        return UnsupportedKeyword(k, path, "together with 'format'");
      }
    }
    const json& f = schema["format"];
    const std::string format = f.is_string() ? f.get<std::string>() : "";
    if (format != "date" && format != "time" && format != "date-time" &&
        format != "uuid") {
      return InvalidArgumentError(
          "format '" + (f.is_string() ? format : f.dump()) + "' at " +
          ShowPath(path) +
          " is not supported (supported: date, time, date-time, uuid)");
    }
    return AddRule(format + "-string",
                   Seq({Quote(), Fixed(format), Quote(), Fixed("ws")}));
  }
  if (schema.contains("pattern")) {
    for (const char* k : {"minLength", "maxLength"}) {
      if (schema.contains(k)) {
        return UnsupportedKeyword(k, path, "together with 'pattern'");
      }
    }
    const json& p = schema["pattern"];
    if (!p.is_string()) {
      return InvalidArgumentError("pattern at " + ShowPath(path) +
                                  " must be a string");
    }
    StatusOr<std::string> expr = RegexToGbnf::Convert(p.get<std::string>());
    if (!expr.ok()) {
      return UnsupportedKeyword("pattern", path, expr.status().message());
    }
    Fixed("char");  // '.' refers to it
    return AddRule("pattern", Seq({Quote(), *expr, Quote(), Fixed("ws")}));
  }
  int64_t min = 0, max = -1;
  KV_RETURN_IF_ERROR(ReadCount(schema, "minLength", path, 0, &min));
  KV_RETURN_IF_ERROR(ReadCount(schema, "maxLength", path, -1, &max));
  if (max >= 0 && max < min) {
    return InvalidArgumentError("string at " + ShowPath(path) +
                                " has maxLength below minLength");
  }
  if (min == 0 && max < 0) return Fixed("string");
  return AddRule(
      "string-" + std::to_string(min) + "-" +
          (max < 0 ? std::string("up") : std::to_string(max)),
      Seq({Quote(), Fixed("char") + Rep(min, max), Quote(), Fixed("ws")}));
}

StatusOr<std::string> SchemaConverter::IntegerRule(const json& schema,
                                                   const std::string& path) {
  double lo = -static_cast<double>(kIntegerBound);
  double hi = static_cast<double>(kIntegerBound);
  bool bounded = false;
  for (const char* k :
       {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (!schema.contains(k)) continue;
    if (!schema[k].is_number()) {
      return UnsupportedKeyword(k, path,
                                "it must be a number (the boolean "
                                "form of draft 4 is not supported)");
    }
    const double v = schema[k].get<double>();
    const std::string_view key(k);
    if (key == "minimum") lo = std::max(lo, std::ceil(v));
    if (key == "exclusiveMinimum") lo = std::max(lo, std::floor(v) + 1);
    if (key == "maximum") hi = std::min(hi, std::floor(v));
    if (key == "exclusiveMaximum") hi = std::min(hi, std::ceil(v) - 1);
    bounded = true;
  }
  if (!bounded) return Fixed("integer");
  lo = std::max(lo, -static_cast<double>(kIntegerBound));
  hi = std::min(hi, static_cast<double>(kIntegerBound));
  if (lo > hi) {
    return InvalidArgumentError("integer at " + ShowPath(path) +
                                " allows no value (minimum above maximum)");
  }
  const int64_t a = static_cast<int64_t>(lo), b = static_cast<int64_t>(hi);
  return AddRule("integer-" + std::to_string(a) + "-" + std::to_string(b),
                 Seq({IntegerRangeExpr(a, b), Fixed("ws")}));
}

StatusOr<std::string> SchemaConverter::VisitAllOf(const json& schema,
                                                  const std::string& path,
                                                  const std::string& hint) {
  const json& parts = schema["allOf"];
  if (!parts.is_array() || parts.empty()) {
    return InvalidArgumentError("allOf at " + ShowPath(path) +
                                " must be a non-empty array of schemas");
  }
  json rest = schema;  // the keywords next to allOf are one more part
  rest.erase("allOf");
  std::vector<std::pair<const json*, std::string>> all;
  for (size_t i = 0; i < parts.size(); ++i) {
    const json* p = &parts[i];
    std::string at = path + "/allOf/" + std::to_string(i);
    while (p->is_object() && p->contains("$ref")) {
      at = (*p)["$ref"].is_string() ? (*p)["$ref"].get<std::string>() : "";
      KV_ASSIGN_OR_RETURN(p, Resolve(at, path));
      at = at.substr(1);
    }
    all.push_back({p, at});
  }
  bool rest_used = false;
  for (const auto& [key, v] : rest.items())
    rest_used |= key != "$defs" && key != "definitions";
  if (rest_used) all.push_back({&rest, path});
  if (all.size() == 1) return Visit(*all[0].first, all[0].second, hint);
  json merged = {{"type", "object"},
                 {"properties", json::object()},
                 {"required", json::array()}};
  for (const auto& [part, at] : all) {
    KV_RETURN_IF_ERROR(MergeObjectPart(*part, at, &merged));
  }
  if (!merged.contains("additionalProperties")) {
    merged["additionalProperties"] = false;
  }
  return ObjectRule(merged, path, hint);
}

}  // namespace kvault
