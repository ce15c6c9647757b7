// The table of filter implementations shared by filters.cc (dispatch and
// text filters) and filters_seq.cc (sequence filters).
#ifndef KVAULT_JINJA_FILTER_TABLE_H_
#define KVAULT_JINJA_FILTER_TABLE_H_

#include <string_view>
#include <unordered_map>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Interpreter;

using FilterFn = StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);
using FilterTable = std::unordered_map<std::string_view, FilterFn>;

// Adds the sequence filters (map, select, sort, join, ...) to `table`.
void AddSequenceFilters(FilterTable* table);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_FILTER_TABLE_H_
