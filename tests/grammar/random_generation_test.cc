// Generation under a grammar: a seeded random sampler picks among the
// tokens AllowedTokens permits (then steers towards an end), and whatever
// it produces must be a sentence of the grammar and, for JSON schemas,
// parse as JSON and satisfy the schema's constraints.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_to_gbnf.h"
#include "test_grammars.h"

namespace kvault {
namespace {

using ojson = nlohmann::ordered_json;

// Samples tokens until the grammar is complete: `random_steps` uniform
// choices, then choices that close what is open. Returns false when it
// cannot finish within the step budget.
bool Generate(const std::shared_ptr<const Grammar>& g,
              const std::vector<std::string>& vocab, const TokenTrie& trie,
              uint32_t seed, int random_steps, std::string* out) {
  static const std::vector<std::string> kClosers = {
      "\"", "}", "]", ")", "=", "@", ".", "0", "1", "a", "null", ",", ":", " "};
  std::mt19937 rng(seed);
  GrammarMatcher m(g);
  out->clear();
  for (int step = 0; step < 600; ++step) {
    if (m.IsComplete() &&
        (step >= random_steps || !m.CanContinue() || rng() % 5 == 0)) {
      return true;
    }
    std::vector<uint8_t> allowed;
    m.AllowedTokens(trie, &allowed);
    std::vector<uint32_t> ids;
    for (uint32_t id = 0; id < allowed.size(); ++id) {
      if (allowed[id]) ids.push_back(id);
    }
    if (ids.empty()) return false;
    std::string pick = vocab[ids[rng() % ids.size()]];
    if (step >= random_steps) {
      // Prefer a token that completes the sentence, then a closer.
      bool chosen = false;
      for (uint32_t id : ids) {
        GrammarMatcher probe = m;
        if (vocab[id].size() == 1 && probe.AcceptBytes(vocab[id]) &&
            probe.IsComplete()) {
          pick = vocab[id];
          chosen = true;
          break;
        }
      }
      // A closer repeated many times is looping (e.g. digits): vary.
      const bool looping =
          out->size() >= 8 &&
          out->find_first_not_of(out->back(), out->size() - 8) ==
              std::string::npos;
      for (size_t i = 0; i < kClosers.size() && !chosen && !looping; ++i) {
        if (m.CanAccept(kClosers[i])) {
          pick = kClosers[i];
          chosen = true;
        }
      }
    }
    EXPECT_TRUE(m.AcceptBytes(pick));
    *out += pick;
  }
  return false;
}

TEST(RandomGenerationTest, ConformanceGrammars) {
  const std::vector<std::string> vocab = SyntheticVocab(1500, 5);
  const TokenTrie trie(vocab);
  for (const char* name : {"json", "json_arr", "arithmetic", "list", "chess"}) {
    SCOPED_TRACE(name);
    const std::string text = ConformanceGrammar(name);
    if (text.empty()) GTEST_SKIP() << "no conformance grammars";
    auto g = MustParse(text);
    for (uint32_t seed = 1; seed <= 10; ++seed) {
      std::string out;
      ASSERT_TRUE(Generate(g, vocab, trie, seed, 25, &out)) << out;
      EXPECT_TRUE(g->Accepts(out)) << out;
    }
  }
}

// A small validator for the constraints the test schemas use.
const ojson& Deref(const ojson& root, const ojson& s) {
  if (s.is_object() && s.contains("$ref")) {
    return root.at(ojson::json_pointer(s["$ref"].get<std::string>().substr(1)));
  }
  return s;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

std::string Check(const ojson& root, const ojson& schema_in,
                  const nlohmann::json& v) {
  const ojson& s = Deref(root, schema_in);
  if (s.is_boolean() || s.empty()) return "";
  if (s.contains("anyOf")) {
    for (const ojson& alt : s["anyOf"]) {
      if (Check(root, alt, v).empty()) return "";
    }
    return "no anyOf branch matches " + v.dump();
  }
  if (s.contains("enum")) {
    for (const ojson& e : s["enum"]) {
      if (nlohmann::json::parse(e.dump()) == v) return "";
    }
    return "not in enum: " + v.dump();
  }
  const std::string type = s.value("type", "");
  if (type == "integer" && !v.is_number_integer()) return "not integer";
  if (type == "integer") {
    const int64_t x = v.get<int64_t>();
    if (s.contains("minimum") && x < s["minimum"].get<int64_t>()) return "min";
    if (s.contains("maximum") && x > s["maximum"].get<int64_t>()) return "max";
  }
  if (s.contains("pattern")) {
    if (!v.is_string()) return "not string";
    const std::regex re(s["pattern"].get<std::string>(),
                        std::regex::ECMAScript);
    if (!std::regex_search(v.get<std::string>(), re)) {
      return "does not match " + s["pattern"].dump();
    }
  }
  if (type == "string") {
    if (!v.is_string()) return "not string";
    const size_t n = CodePoints(v.get<std::string>());
    if (n < s.value("minLength", 0u) || n > s.value("maxLength", 1000000u)) {
      return "string length " + std::to_string(n);
    }
  }
  if (type == "boolean" && !v.is_boolean()) return "not boolean";
  if (type == "array") {
    if (!v.is_array()) return "not array";
    if (v.size() < s.value("minItems", 0u) ||
        v.size() > s.value("maxItems", 1000000u)) {
      return "item count " + std::to_string(v.size());
    }
    for (const auto& item : v) {
      std::string e = Check(root, s.value("items", ojson::object()), item);
      if (!e.empty()) return e;
    }
  }
  if (type == "object") {
    if (!v.is_object()) return "not object";
    for (const ojson& r : s.value("required", ojson::array())) {
      if (!v.contains(r.get<std::string>())) return "missing " + r.dump();
    }
    const ojson props = s.value("properties", ojson::object());
    for (const auto& [k, item] : v.items()) {
      if (!props.contains(k)) return "unexpected key " + k;
      std::string e = Check(root, props[k], item);
      if (!e.empty()) return k + ": " + e;
    }
  }
  return "";
}

TEST(RandomGenerationTest, JsonSchemasProduceValidInstances) {
  const std::vector<const char*> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string",
          "maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120},
          "role":{"enum":["admin","user",null]},"tags":{"type":"array",
          "items":{"type":"string","minLength":1,"maxLength":3},
          "minItems":1,"maxItems":3}},"required":["name","role","tags"],
          "additionalProperties":false})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":
          "integer","minimum":-5,"maximum":5},"kids":{"type":"array",
          "items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
          "type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3})",
      R"({"type":"object","properties":{"code":{"type":"string","pattern":
          "^[A-Z]{2}-\\d{3}$"},"mail":{"type":"string","pattern":
          "^\\w+@\\w+\\.(com|org)$"}},"required":["code","mail"]})",
      R"({"anyOf":[{"type":"boolean"},{"type":"array","items":{"type":
          "integer"},"minItems":2,"maxItems":4}]})",
  };
  std::vector<std::string> vocab = SyntheticVocab(1500, 9);
  for (const char* piece : {"\"name\"", "\"age\"", "\"role\"", "\"tags\"",
                            "admin", "\"v\"", "\"kids\""}) {
    vocab.push_back(piece);
  }
  const TokenTrie trie(vocab);
  for (const char* text : schemas) {
    const ojson schema = ojson::parse(text);
    StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    auto g = MustParse(*gbnf);
    for (uint32_t seed = 1; seed <= 15; ++seed) {
      std::string out;
      ASSERT_TRUE(Generate(g, vocab, trie, seed, 20, &out)) << out;
      EXPECT_TRUE(g->Accepts(out)) << out;
      const nlohmann::json v =
          nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(v.is_discarded()) << out;
      EXPECT_EQ(Check(schema, schema, v), "") << out;
    }
  }
}

}  // namespace
}  // namespace kvault
