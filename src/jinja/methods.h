// Attribute and item access with the immutable sandbox's rules, slicing,
// and the Python str/dict/list methods templates may call.
//
// x.y looks up the attribute first (a method), then the item; x['y'] the
// item first, then the attribute. Mutating methods (append, update, pop...)
// and names starting with '_' are unsafe: looking one up gives an Undefined
// whose call raises SecurityError.
#ifndef KVAULT_JINJA_METHODS_H_
#define KVAULT_JINJA_METHODS_H_

#include <string>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Interpreter;

// Returns `obj.name` (obj must not be Undefined).
Value GetAttr(const Value& obj, const std::string& name);

// Returns `obj[key]` (obj must not be Undefined).
Value GetItem(const Value& obj, const Value& key);

// Returns `obj[start:stop:step]`; null bounds are omitted ones.
StatusOr<Value> SliceValue(Interpreter& ip, const Value& obj,
                           const Value* start, const Value* stop,
                           const Value* step);

// Returns the items `for x in v` visits: a dict's keys, a str's characters;
// an Undefined gives none; TypeError for non-iterables.
StatusOr<std::vector<Value>> Iterate(const Value& v);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_METHODS_H_
