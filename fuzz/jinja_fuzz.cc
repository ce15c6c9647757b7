// libFuzzer target for the Jinja engine: lexer, parser and renderer on
// arbitrary templates and contexts, with small limits so every input runs
// fast. The input is "<template>\0<JSON context>"; without a NUL (or with a
// context that is not a JSON object) a fixed chat context is used.
// Properties checked on every input:
//   - parsing and rendering never crash, hang or leak (the sanitizers and
//     libFuzzer's timeout check these);
//   - every failure is a jinja error with a kind (never an internal error);
//   - the output respects max_output_bytes;
//   - rendering is deterministic: a second render gives the same result.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_assert.h"
#include "jinja/error.h"
#include "jinja/strftime.h"
#include "jinja/template.h"

namespace kvault::jinja {
namespace {

constexpr size_t kMaxOutput = 1 << 16;

nlohmann::ordered_json DefaultContext() {
  return nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
      {"role": "assistant", "content": "", "reasoning_content": "hm",
       "tool_calls": [{"id": "call_1", "type": "function", "function":
         {"name": "f", "arguments": {"a": 1, "b": [1.5, null, true]}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 2}"}],
    "tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"a": {"type": "int"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
}

RenderOptions FuzzRenderOptions() {
  RenderOptions o;
  o.max_output_bytes = kMaxOutput;
  o.max_operations = 200'000;
  o.max_depth = 64;
  std::tm now{};
  ParseIsoDateTime("2026-01-15T09:30:00", &now);
  o.now = [now] { return now; };
  return o;
}

void CheckFailure(const Status& status) {
  FUZZ_ASSERT(!status.ok());
  FUZZ_ASSERT(ErrorKindOf(status) != ErrorKind::kNone);
}

}  // namespace
}  // namespace kvault::jinja

namespace jinja = kvault::jinja;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  nlohmann::ordered_json context;
  if (nul != std::string_view::npos) {
    context = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr,
                                            /*allow_exceptions=*/false);
  }
  if (!context.is_object()) context = jinja::DefaultContext();
  jinja::ParseOptions parse_options;
  parse_options.max_depth = 64;
  kvault::StatusOr<jinja::Template> t =
      jinja::Template::Parse(source, parse_options);
  if (!t.ok()) {
    jinja::CheckFailure(t.status());
    return 0;
  }
  const jinja::RenderOptions options = jinja::FuzzRenderOptions();
  kvault::StatusOr<std::string> first = t->Render(context, options);
  kvault::StatusOr<std::string> second = t->Render(context, options);
  FUZZ_ASSERT(first.ok() == second.ok());
  if (!first.ok()) {
    jinja::CheckFailure(first.status());
    FUZZ_ASSERT(first.status() == second.status());
    return 0;
  }
  FUZZ_ASSERT(first->size() <= jinja::kMaxOutput);
  FUZZ_ASSERT(*first == *second);
  return 0;
}
