// Sequence filters: join, first/last, list, map/select/reject(attr),
// unique, dictsort, items, reverse, sort, sum, min/max, batch, slice.
#include <algorithm>
#include <string>

#include "jinja/args.h"
#include "jinja/filter_table.h"
#include "jinja/filters.h"
#include "jinja/interpreter.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"
#include "jinja/test_functions.h"
#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

using Fn = StatusOr<Value>;

// The value sort/unique/min/max compare: lowercased strings unless
// case-sensitive, optionally an attribute of each item.
StatusOr<Value> SortKey(const Value& item, const std::string& attribute,
                        bool case_sensitive) {
  Value key = item;
  if (!attribute.empty()) {
    KV_ASSIGN_OR_RETURN(key, GetPath(item, attribute));
  }
  if (!case_sensitive && key.is_string())
    return Value::String(PyLower(key.str()));
  return key;
}

Fn Join(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("join", args, {"d", "attribute"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string sep = ToStr(r.Get(0, Value::String("")));
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (r.Has(1)) {
      KV_ASSIGN_OR_RETURN(item, GetPath(item, ToStr(r.Get(1))));
    }
    if (i > 0) out += sep;
    if (!AppendStr(item, ip.options().max_output_bytes, &out)) break;
    KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
  }
  KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
  KV_RETURN_IF_ERROR(ip.ChargeBytes(out.size()));
  return Value::String(std::move(out));
}

Fn First(Interpreter&, const Value& v, CallArgs&) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Fn Last(Interpreter&, const Value& v, CallArgs&) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

Fn List(Interpreter&, const Value& v, CallArgs&) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  return Value::List(std::move(items));
}

// jinja2's map/select start with `if value:`, so any falsy value (None,
// false, 0) gives an empty result instead of a TypeError.
StatusOr<std::vector<Value>> LazyItems(const Value& v) {
  if (!v.Truthy()) return std::vector<Value>();
  return Iterate(v);
}

Fn Map(Interpreter& ip, const Value& v, CallArgs& args) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, LazyItems(v));
  std::vector<Value> out;
  if (args.positional.empty()) {
    ArgReader r("map", args, {"attribute", "default"});
    KV_RETURN_IF_ERROR(r.status());
    const std::string attribute = ToStr(r.Get(0));
    for (const Value& item : items) {
      KV_ASSIGN_OR_RETURN(Value x, GetPath(item, attribute));
      if (x.is_undefined() && r.Has(1)) x = r.Get(1);
      out.push_back(std::move(x));
    }
    return Value::Generator(std::move(out));
  }
  const std::string name = ToStr(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs call = rest;
    KV_ASSIGN_OR_RETURN(Value x, ApplyFilter(ip, name, item, call));
    out.push_back(std::move(x));
  }
  return Value::Generator(std::move(out));
}

// select/reject (attr empty) and selectattr/rejectattr.
StatusOr<Value> Select(Interpreter& ip, const Value& v, CallArgs& args,
                       bool by_attr, bool keep_when) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, LazyItems(v));
  size_t at = 0;
  std::string attribute;
  if (by_attr) {
    if (args.positional.empty()) {
      return JinjaError(ErrorKind::kType, "selectattr needs an attribute");
    }
    attribute = ToStr(args.positional[at++]);
  }
  std::string test;
  if (at < args.positional.size()) test = ToStr(args.positional[at++]);
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + at,
                              args.positional.end());
  test_args.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attr) {
      KV_ASSIGN_OR_RETURN(x, GetPath(item, attribute));
    }
    bool pass = x.Truthy();
    if (!test.empty()) {
      CallArgs call = test_args;
      KV_ASSIGN_OR_RETURN(pass, ApplyTest(ip, test, x, call));
    }
    if (pass == keep_when) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Fn SelectF(Interpreter& ip, const Value& v, CallArgs& a) {
  return Select(ip, v, a, false, true);
}
Fn RejectF(Interpreter& ip, const Value& v, CallArgs& a) {
  return Select(ip, v, a, false, false);
}
Fn SelectAttr(Interpreter& ip, const Value& v, CallArgs& a) {
  return Select(ip, v, a, true, true);
}
Fn RejectAttr(Interpreter& ip, const Value& v, CallArgs& a) {
  return Select(ip, v, a, true, false);
}

Fn Unique(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("unique", args, {"case_sensitive", "attribute"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string attribute = r.Has(1) ? ToStr(r.Get(1)) : "";
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    KV_ASSIGN_OR_RETURN(Value key,
                        SortKey(item, attribute, r.GetBool(0, false)));
    bool dup = false;
    for (const Value& s : seen) dup |= Equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Status SortValues(std::vector<Value>* items, std::vector<Value>* keys,
                  bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    StatusOr<int> c =
        reverse ? Order((*keys)[b], (*keys)[a]) : Order((*keys)[a], (*keys)[b]);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  KV_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return Status::Ok();
}

Fn Sort(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("sort", args, {"reverse", "case_sensitive", "attribute"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string attribute = r.Has(2) ? ToStr(r.Get(2)) : "";
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  KV_RETURN_IF_ERROR(ip.Charge(items.size() * 8));
  std::vector<Value> keys;
  for (const Value& item : items) {
    KV_ASSIGN_OR_RETURN(Value k, SortKey(item, attribute, r.GetBool(1, false)));
    keys.push_back(std::move(k));
  }
  KV_RETURN_IF_ERROR(SortValues(&items, &keys, r.GetBool(0, false)));
  return Value::List(std::move(items));
}

Fn DictSort(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("dictsort", args, {"case_sensitive", "by", "reverse"});
  KV_RETURN_IF_ERROR(r.status());
  if (!v.is_dict()) {
    return JinjaError(ErrorKind::kTemplate,
                      "You can only sort by either \"key\" or \"value\"");
  }
  KV_ASSIGN_OR_RETURN(std::string by, r.GetString(1, "key"));
  std::vector<Value> items, keys;
  for (size_t i = 0; i < v.map().size(); ++i) {
    const Value k = v.map().KeyAt(i);
    const Value& val = v.map().entries()[i].second;
    items.push_back(Value::Tuple({k, val}));
    KV_ASSIGN_OR_RETURN(
        Value key, SortKey(by == "value" ? val : k, "", r.GetBool(0, false)));
    keys.push_back(std::move(key));
  }
  KV_RETURN_IF_ERROR(ip.Charge(items.size() * 8));
  KV_RETURN_IF_ERROR(SortValues(&items, &keys, r.GetBool(2, false)));
  return Value::List(std::move(items));
}

Fn Items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::Generator({});
  if (!v.is_dict()) {
    return JinjaError(ErrorKind::kType,
                      "Can only get item pairs from a "
                      "mapping.");
  }
  std::vector<Value> out;
  for (size_t i = 0; i < v.map().size(); ++i) {
    out.push_back(
        Value::Tuple({v.map().KeyAt(i), v.map().entries()[i].second}));
  }
  return Value::Generator(std::move(out));
}

Fn Reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string s = DecodeUtf8(v.str());
    std::reverse(s.begin(), s.end());
    return Value::String(EncodeUtf8(s));
  }
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::Generator(std::move(items));
}

Fn Sum(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("sum", args, {"attribute", "start"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  Value total = r.Get(1, Value::Int(0));
  for (const Value& item : items) {
    Value x = item;
    if (r.Has(0)) {
      KV_ASSIGN_OR_RETURN(x, GetPath(item, ToStr(r.Get(0))));
    }
    KV_ASSIGN_OR_RETURN(total, BinaryOp(ip, "+", total, x));
  }
  return total;
}

StatusOr<Value> MinMax(const Value& v, CallArgs& args, bool max) {
  ArgReader r(max ? "max" : "min", args, {"case_sensitive", "attribute"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string attribute = r.Has(1) ? ToStr(r.Get(1)) : "";
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) {
    return Value::Undefined(
        std::string("No aggregated item, sequence was "
                    "empty."));
  }
  size_t best = 0;
  KV_ASSIGN_OR_RETURN(Value best_key,
                      SortKey(items[0], attribute, r.GetBool(0, false)));
  for (size_t i = 1; i < items.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Value key,
                        SortKey(items[i], attribute, r.GetBool(0, false)));
    KV_ASSIGN_OR_RETURN(int c, Order(key, best_key));
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Fn Min(Interpreter&, const Value& v, CallArgs& a) {
  return MinMax(v, a, false);
}
Fn Max(Interpreter&, const Value& v, CallArgs& a) { return MinMax(v, a, true); }

Fn Batch(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("batch", args, {"linecount", "fill_with"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t n, r.GetInt(0, 1));
  if (n <= 0) return JinjaError(ErrorKind::kValue, "batch size must be > 0");
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out, cur;
  for (const Value& item : items) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::List(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (r.Has(1)) {
      KV_RETURN_IF_ERROR(ip.Charge(n));
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(r.Get(1));
    }
    out.push_back(Value::List(std::move(cur)));
  }
  return Value::Generator(std::move(out));
}

Fn Slice(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("slice", args, {"slices", "fill_with"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t slices, r.GetInt(0, 1));
  if (slices <= 0) return JinjaError(ErrorKind::kValue, "slices must be > 0");
  KV_RETURN_IF_ERROR(ip.Charge(slices));
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t per = n / slices, extra = n % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per;
    if (i < extra) ++offset;
    const int64_t end = offset + (i + 1) * per;
    std::vector<Value> part(items.begin() + start, items.begin() + end);
    if (r.Has(1) && i >= extra) part.push_back(r.Get(1));
    out.push_back(Value::List(std::move(part)));
  }
  return Value::Generator(std::move(out));
}

}  // namespace

void AddSequenceFilters(FilterTable* t) {
  t->insert({{"join", Join},
             {"first", First},
             {"last", Last},
             {"list", List},
             {"map", Map},
             {"select", SelectF},
             {"reject", RejectF},
             {"selectattr", SelectAttr},
             {"rejectattr", RejectAttr},
             {"unique", Unique},
             {"sort", Sort},
             {"dictsort", DictSort},
             {"items", Items},
             {"reverse", Reverse},
             {"sum", Sum},
             {"min", Min},
             {"max", Max},
             {"batch", Batch},
             {"slice", Slice}});
}

}  // namespace kvault::jinja
