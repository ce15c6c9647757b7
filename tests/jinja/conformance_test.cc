// Runs every case of shared/conformance/chat-templates: each NAME.jinja is
// rendered with the context its NAME.cases.json describes and must give the
// recorded jinja2 3.1.2 output byte for byte, or fail where jinja2 raised.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "jinja/error.h"
#include "jinja/strftime.h"
#include "jinja/template.h"

namespace kvault::jinja {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

fs::path ConformanceDir() {
  return fs::path(KVAULT_SOURCE_DIR) / ".." / "shared" / "conformance" /
         "chat-templates";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The context the README prescribes: messages, add_generation_prompt, the
// env's tokens, tools only when present, extra_vars at top level.
Json BuildContext(const Json& env, const Json& c) {
  Json ctx = Json::object();
  ctx["messages"] = c.at("messages");
  ctx["add_generation_prompt"] = c.value("add_generation_prompt", false);
  ctx["bos_token"] = env.at("bos_token");
  ctx["eos_token"] = env.at("eos_token");
  if (c.contains("tools")) ctx["tools"] = c.at("tools");
  if (c.contains("extra_vars")) {
    for (const auto& [k, v] : c.at("extra_vars").items()) ctx[k] = v;
  }
  return ctx;
}

struct Tally {
  int pass = 0;
  int total = 0;
};

TEST(ChatTemplateConformanceTest, AllCasesMatchJinja2) {
  const fs::path dir = ConformanceDir();
  if (!fs::is_directory(dir)) {
    GTEST_SKIP() << "no conformance folder at " << dir;
  }
  std::vector<fs::path> case_files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".cases.json")) case_files.push_back(entry.path());
  }
  std::sort(case_files.begin(), case_files.end());
  ASSERT_FALSE(case_files.empty());
  std::map<std::string, Tally> tallies;
  int pass = 0, total = 0;
  for (const fs::path& file : case_files) {
    const Json spec = Json::parse(ReadFile(file));
    const std::string name = spec.at("template").get<std::string>();
    const Json& env = spec.at("env");
    std::tm now{};
    ASSERT_TRUE(ParseIsoDateTime(env.at("now").get<std::string>(), &now));
    RenderOptions options;
    options.now = [now] { return now; };
    StatusOr<Template> tmpl = Template::Parse(ReadFile(dir / name));
    Tally& tally = tallies[name];
    for (const Json& c : spec.at("cases")) {
      ++tally.total;
      ++total;
      const std::string id = name + " " + c.at("id").get<std::string>();
      StatusOr<std::string> out =
          tmpl.ok() ? tmpl->Render(BuildContext(env, c), options)
                    : StatusOr<std::string>(tmpl.status());
      bool ok;
      if (c.contains("expect_error")) {
        // The message need not match; the exception class must.
        const std::string type = c.at("error_type").get<std::string>();
        const std::string kind =
            out.ok() ? "none"
                     : std::string(ErrorKindName(ErrorKindOf(out.status())));
        ok = !out.ok() && kind == type;
        EXPECT_EQ(kind, type)
            << id << ": " << (out.ok() ? *out : out.status().ToString());
      } else {
        ok = out.ok() && *out == c.at("expect").get<std::string>();
        EXPECT_TRUE(out.ok()) << id << ": " << out.status();
        if (out.ok()) {
          EXPECT_EQ(*out, c.at("expect").get<std::string>()) << id;
        }
      }
      if (ok) {
        ++tally.pass;
        ++pass;
      }
    }
  }
  for (const auto& [name, t] : tallies) {
    std::printf("%-55s %d/%d\n", name.c_str(), t.pass, t.total);
  }
  std::printf("conformance: %d/%d cases pass\n", pass, total);
}

}  // namespace
}  // namespace kvault::jinja
