// Chat template rendering speed: a 20-turn conversation with tools (every
// third turn calls a tool and gets its result) rendered by each real
// template in ../shared/conformance/chat-templates that handles tools,
// through the Jinja engine as the server calls it (the JSON context is
// converted on every render). The goal (issue 20) is under 1 ms a render.
//
//   build/bench/jinja_bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace kvault::jinja {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kTurns = 20;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Gives every tool call the id "call12345": 9 alphanumerics, which
// Mistral's templates insist on and every other template takes.
ojson WithNineCharIds(ojson m) {
  if (m.contains("tool_call_id")) m["tool_call_id"] = "call12345";
  if (m.contains("tool_calls")) {
    for (ojson& call : m["tool_calls"]) call["id"] = "call12345";
  }
  return m;
}

// The template's own tool case (messages the template accepts), replayed
// every third turn between ordinary question/answer turns.
ojson Conversation(const ojson& tool_case) {
  ojson messages = ojson::array();
  messages.push_back({{"role", "system"},
                      {"content", "You are a careful assistant with tools."}});
  for (int turn = 0; turn < kTurns; ++turn) {
    if (turn % 3 == 0) {
      for (const ojson& m : tool_case["messages"]) {
        if (m.value("role", "") != "system") {
          messages.push_back(WithNineCharIds(m));
        }
      }
      if (messages.back().value("role", "") == "user") continue;
    } else {
      messages.push_back(
          {{"role", "user"},
           {"content", "Turn " + std::to_string(turn) +
                           ": what should I pack for a week in Paris?"}});
    }
    messages.push_back(
        {{"role", "assistant"},
         {"content", "A light coat, an umbrella and good walking shoes; "
                     "the forecast says 21 degrees and some rain."}});
  }
  messages.push_back({{"role", "user"}, {"content", "Thanks! Anything else?"}});
  return messages;
}

void BM_Render20Turns(benchmark::State& state, const Template& tmpl,
                      const ojson context) {
  size_t bytes = 0;
  for (auto _ : state) {
    StatusOr<std::string> prompt = tmpl.Render(context);
    if (!prompt.ok()) {
      state.SkipWithError(prompt.status().ToString().c_str());
      return;
    }
    bytes = prompt->size();
    benchmark::DoNotOptimize(prompt);
  }
  state.counters["messages"] = context["messages"].size();
  state.counters["prompt_bytes"] = bytes;
}

// Registers one benchmark per template that has a case with tools.
void RegisterTemplates() {
  const std::filesystem::path dir =
      std::filesystem::path(KVAULT_SOURCE_DIR) /
      "../shared/conformance/chat-templates";
  if (!std::filesystem::is_directory(dir)) return;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".cases.json";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix)) {
      continue;
    }
    const ojson cases = ojson::parse(ReadFile(entry.path()), nullptr, false);
    if (cases.is_discarded()) continue;
    for (const ojson& c : cases.value("cases", ojson::array())) {
      if (!c.contains("tools")) continue;
      auto tmpl = Template::Parse(
          ReadFile(dir / cases["template"].get<std::string>()));
      if (!tmpl.ok()) break;
      ojson context = cases.value("env", ojson::object());
      context.erase("now");
      context["messages"] = Conversation(c);
      context["tools"] = c["tools"];
      context["add_generation_prompt"] = true;
      const std::string stem = name.substr(0, name.size() - suffix.size());
      // Templates that refuse the conversation (as jinja2 does: their own
      // tool case is an expected error) are left out, with the reason.
      if (auto probe = tmpl->Render(context); !probe.ok()) {
        std::fprintf(stderr, "%s: not measured: %s\n", stem.c_str(),
                     probe.status().ToString().c_str());
        break;
      }
      benchmark::RegisterBenchmark(("Render20TurnsWithTools/" + stem).c_str(),
                                   BM_Render20Turns, *tmpl, context)
          ->Unit(benchmark::kMicrosecond);
      break;
    }
  }
}

}  // namespace
}  // namespace kvault::jinja

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kvault::jinja::RegisterTemplates();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
