#include "jinja/template.h"

#include <exception>
#include <new>

#include "jinja/interpreter.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace kvault::jinja {

StatusOr<Template> Template::Parse(std::string_view source,
                                   const ParseOptions& options) {
  if (source.size() > options.max_source_bytes) {
    return JinjaError(ErrorKind::kLimit,
                      "template source exceeds the limit of " +
                          std::to_string(options.max_source_bytes) + " bytes");
  }
  try {
    LexerOptions lex;
    lex.trim_blocks = options.trim_blocks;
    lex.lstrip_blocks = options.lstrip_blocks;
    lex.keep_trailing_newline = options.keep_trailing_newline;
    KV_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, lex));
    Parser parser(std::move(tokens), options.max_depth);
    KV_ASSIGN_OR_RETURN(Body body, parser.ParseTemplate());
    return Template(std::make_shared<const Body>(std::move(body)));
  } catch (const std::bad_alloc&) {
    return JinjaError(ErrorKind::kLimit, "out of memory while parsing");
  } catch (const std::exception& e) {
    return InternalError(std::string("jinja parse: ") + e.what());
  }
}

StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                       const RenderOptions& options) const {
  if (!context.is_object()) {
    return InvalidArgumentError("template context must be a JSON object");
  }
  ValueMap vars;
  try {
    for (const auto& [k, v] : context.items()) vars.Set(k, Value::FromJson(v));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("template context: ") + e.what());
  }
  return Render(vars, options);
}

StatusOr<std::string> Template::Render(const ValueMap& context,
                                       const RenderOptions& options) const {
  try {
    std::string out;
    {
      Interpreter interpreter(options);
      KV_RETURN_IF_ERROR(interpreter.Render(*body_, context, &out));
    }
    return out;
  } catch (const std::bad_alloc&) {
    return JinjaError(ErrorKind::kLimit, "out of memory while rendering");
  } catch (const std::exception& e) {
    return InternalError(std::string("jinja render: ") + e.what());
  }
}

}  // namespace kvault::jinja
