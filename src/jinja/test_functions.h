// jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...).
#ifndef KVAULT_JINJA_TEST_FUNCTIONS_H_
#define KVAULT_JINJA_TEST_FUNCTIONS_H_

#include <string_view>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Interpreter;

// Returns `operand is name(args)`; TemplateError for unknown tests.
StatusOr<bool> ApplyTest(Interpreter& ip, std::string_view name,
                         const Value& operand, CallArgs& args);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_TEST_FUNCTIONS_H_
