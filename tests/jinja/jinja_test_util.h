// Helpers shared by the Jinja tests: render a template (with the fixed clock
// of the conformance cases) and describe the outcome as one string.
#ifndef KVAULT_TESTS_JINJA_JINJA_TEST_UTIL_H_
#define KVAULT_TESTS_JINJA_JINJA_TEST_UTIL_H_

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "jinja/error.h"
#include "jinja/strftime.h"
#include "jinja/template.h"

namespace kvault::jinja {

// One table-driven case: template source, JSON context, expected outcome.
struct RenderCase {
  const char* source;
  const char* context;
  const char* expected;
};

// Options with strftime_now pinned to 2026-01-15 09:30:00.
inline RenderOptions FixedClockOptions() {
  RenderOptions options;
  std::tm now{};
  ParseIsoDateTime("2026-01-15T09:30:00", &now);
  options.now = [now] { return now; };
  return options;
}

// Returns "error:<ErrorKindName>" for a failure.
inline std::string ErrorOutcome(const Status& status) {
  return "error:" + std::string(ErrorKindName(ErrorKindOf(status)));
}

// Returns the rendered text, or "error:<kind>" when parsing or rendering
// failed.
inline std::string RenderOrError(
    std::string_view source, std::string_view context_json = "{}",
    const RenderOptions& options = FixedClockOptions()) {
  StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return ErrorOutcome(t.status());
  StatusOr<std::string> out =
      t->Render(nlohmann::ordered_json::parse(context_json), options);
  if (!out.ok()) return ErrorOutcome(out.status());
  return *out;
}

}  // namespace kvault::jinja

#endif  // KVAULT_TESTS_JINJA_JINJA_TEST_UTIL_H_
