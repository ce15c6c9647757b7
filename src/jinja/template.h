// Template: the public entry point of the Jinja engine.
//
//   KV_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
//   jinja::RenderOptions options;
//   options.now = [] { ... return fixed std::tm; };
//   KV_ASSIGN_OR_RETURN(std::string prompt, t.Render(context_json, options));
//
// Semantics are those of Python jinja2 3.1 in the environment Hugging Face
// transformers builds for chat templates (see
// shared/conformance/chat-templates/README.md). Errors are Statuses; see
// jinja/error.h for their kinds. No exception escapes.
#ifndef KVAULT_JINJA_TEMPLATE_H_
#define KVAULT_JINJA_TEMPLATE_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status_or.h"
#include "jinja/ast.h"
#include "jinja/error.h"
#include "jinja/options.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Template {
 public:
  // Parses `source`; a syntax error reads "template:LINE:COL: message".
  static StatusOr<Template> Parse(std::string_view source,
                                  const ParseOptions& options = {});

  // Renders with the keys of the JSON object `context` as variables (kept
  // in their JSON order); InvalidArgument when it is not an object.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                               const RenderOptions& options = {}) const;

  // Renders with `context` as the top-level variables.
  StatusOr<std::string> Render(const ValueMap& context,
                               const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body)
      : body_(std::move(body)) {}

  // Shared so Templates copy cheaply; never changed after parsing.
  std::shared_ptr<const Body> body_;
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_TEMPLATE_H_
