#include "jinja/globals.h"

#include <chrono>
#include <ctime>
#include <memory>

#include "jinja/args.h"
#include "jinja/interpreter.h"
#include "jinja/python_format.h"
#include "jinja/strftime.h"

namespace kvault::jinja {
namespace {

StatusOr<Value> Range(Interpreter& ip, CallArgs& args) {
  if (!args.keyword.empty() || args.positional.empty() ||
      args.positional.size() > 3) {
    return JinjaError(ErrorKind::kType, "range expected 1 to 3 arguments");
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& a = args.positional[i];
    if (!a.is_int() && !a.is_bool()) {
      return JinjaError(ErrorKind::kType, "'" + TypeName(a) +
                                              "' object cannot be interpreted "
                                              "as an integer");
    }
    const int64_t x = a.is_int() ? a.int_value() : a.bool_value();
    if (args.positional.size() == 1) {
      v[1] = x;
    } else {
      v[i] = x;
    }
  }
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) {
    return JinjaError(ErrorKind::kValue, "range() arg 3 must not be zero");
  }
  // Count in 128 bits: stop - start may overflow int64.
  __int128 span = static_cast<__int128>(stop) - start;
  __int128 n = 0;
  if (step > 0 && span > 0) n = (span + step - 1) / step;
  if (step < 0 && span < 0)
    n = (-span + (-static_cast<__int128>(step)) - 1) /
        (-static_cast<__int128>(step));
  if (n > static_cast<__int128>(ip.options().max_operations)) {
    return ip.Charge(ip.options().max_operations + 1);
  }
  KV_RETURN_IF_ERROR(ip.ChargeItems(static_cast<uint64_t>(n)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (__int128 i = 0; i < n; ++i) {
    items.push_back(Value::Int(static_cast<int64_t>(start + i * step)));
  }
  return Value::List(std::move(items));
}

StatusOr<ValueMap> KeywordMap(const CallArgs& args, const char* name) {
  ValueMap map;
  if (args.positional.size() > 1) {
    return JinjaError(ErrorKind::kType,
                      std::string(name) + " expected at most 1 argument");
  }
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.is_dict() || init.is_namespace()) {
      for (size_t i = 0; i < init.map().size(); ++i) {
        map.SetKey(init.map().KeyAt(i), init.map().entries()[i].second);
      }
    } else if (init.is_list_like()) {
      for (const Value& pair : init.items()) {
        if (!pair.is_list_like() || pair.items().size() != 2) {
          return JinjaError(ErrorKind::kValue,
                            "dictionary update sequence element has wrong "
                            "length");
        }
        map.SetKey(pair.items()[0], pair.items()[1]);
      }
    } else {
      return JinjaError(ErrorKind::kType,
                        "'" + TypeName(init) + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : args.keyword) map.Set(k, v);
  return map;
}

StatusOr<Value> Cycler(Interpreter& ip, CallArgs& args) {
  auto items = std::make_shared<std::vector<Value>>(args.positional);
  if (items->empty()) {
    return JinjaError(ErrorKind::kType, "at least one item has to be provided");
  }
  Value ns = ip.NewNamespace(ValueMap());
  // The functions reach the namespace by raw pointer: the interpreter keeps
  // it alive for the render, and an owning capture would form a cycle.
  ValueMap* map = &ns.mutable_map();
  auto pos = std::make_shared<size_t>(0);
  map->Set("current", (*items)[0]);
  map->Set("next",
           Value::Func("next", [items, pos, map](Interpreter&, CallArgs&) {
             const Value v = (*items)[*pos];
             *pos = (*pos + 1) % items->size();
             map->Set("current", (*items)[*pos]);
             return StatusOr<Value>(v);
           }));
  map->Set("reset",
           Value::Func("reset", [items, pos, map](Interpreter&, CallArgs&) {
             *pos = 0;
             map->Set("current", (*items)[0]);
             return StatusOr<Value>(Value::None());
           }));
  return ns;
}

StatusOr<Value> Joiner(Interpreter&, CallArgs& args) {
  ArgReader r("joiner", args, {"sep"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string sep = ToStr(r.Get(0, Value::String(", ")));
  auto used = std::make_shared<bool>(false);
  return Value::Func("joiner", [sep, used](Interpreter&, CallArgs&) {
    const bool first = !*used;
    *used = true;
    return StatusOr<Value>(Value::String(first ? "" : sep));
  });
}

StatusOr<Value> Lipsum(Interpreter&, CallArgs&) {
  return Value::String(
      "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do "
      "eiusmod tempor incididunt ut labore et dolore magna aliqua.");
}

StatusOr<Value> RaiseException(Interpreter&, CallArgs& args) {
  ArgReader r("raise_exception", args, {"message"});
  KV_RETURN_IF_ERROR(r.status());
  return JinjaError(ErrorKind::kTemplate, ToStr(r.Get(0)));
}

StatusOr<Value> StrftimeNow(Interpreter& ip, CallArgs& args) {
  ArgReader r("strftime_now", args, {"format"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(std::string format, r.GetString(0, ""));
  std::tm now{};
  if (ip.options().now) {
    now = ip.options().now();
  } else {
    const std::time_t t =
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  return Value::String(Strftime(format, now));
}

}  // namespace

ValueMap MakeGlobals() {
  ValueMap g;
  g.Set("range", Value::Func("range", Range));
  g.Set(
      "dict",
      Value::Func("dict", [](Interpreter&, CallArgs& args) -> StatusOr<Value> {
        KV_ASSIGN_OR_RETURN(ValueMap map, KeywordMap(args, "dict"));
        return Value::Dict(std::move(map));
      }));
  g.Set("namespace",
        Value::Func("namespace",
                    [](Interpreter& ip, CallArgs& args) -> StatusOr<Value> {
                      KV_ASSIGN_OR_RETURN(ValueMap map,
                                          KeywordMap(args, "namespace"));
                      return ip.NewNamespace(std::move(map));
                    }));
  g.Set("cycler", Value::Func("cycler", Cycler));
  g.Set("joiner", Value::Func("joiner", Joiner));
  g.Set("lipsum", Value::Func("lipsum", Lipsum));
  g.Set("raise_exception", Value::Func("raise_exception", RaiseException));
  g.Set("strftime_now", Value::Func("strftime_now", StrftimeNow));
  return g;
}

}  // namespace kvault::jinja
