// The global functions every template sees: jinja2's defaults (range, dict,
// namespace, cycler, joiner, lipsum) and transformers' raise_exception and
// strftime_now.
#ifndef KVAULT_JINJA_GLOBALS_H_
#define KVAULT_JINJA_GLOBALS_H_

#include "jinja/value.h"

namespace kvault::jinja {

// Returns the globals by name.
ValueMap MakeGlobals();

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_GLOBALS_H_
