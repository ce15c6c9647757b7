// jinja2's built-in filters (plus transformers' tojson), applied by name.
#ifndef KVAULT_JINJA_FILTERS_H_
#define KVAULT_JINJA_FILTERS_H_

#include <string_view>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Interpreter;

// Returns `operand | name(args)`; TemplateError "No filter named 'x'." for
// unknown names (jinja2 reports those at compile time unless the filter sits
// in a branch; here they fail only when reached).
StatusOr<Value> ApplyFilter(Interpreter& ip, std::string_view name,
                            const Value& operand, CallArgs& args);

// True when `name` is a known filter (the `filter` test).
bool HasFilter(std::string_view name);

// Returns the value `attribute` ("a.b", "0") names in `item`, with item
// lookup first as jinja2's attribute getters do.
StatusOr<Value> GetPath(const Value& item, std::string_view attribute);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_FILTERS_H_
