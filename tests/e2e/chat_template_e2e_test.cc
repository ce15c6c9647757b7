// Every real chat template of ../shared/conformance/chat-templates rendered
// through POST /apply-template of the real server (started with
// --chat-template-file and KVAULT_FAKE_NOW, as the issue specifies) must
// give exactly the bytes Python's jinja2 rendered (less the leading BOS
// the tokenizer adds anyway), or an error where jinja2 raised one. Cases
// whose content is a list of parts are the engine's alone (see
// HasTextParts).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::ordered_json;

// stories260K's BOS as the templates write it (bos_token).
const std::string kBos = "<s>";

ordered_json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str(), nullptr, false);
}

// The request body of one case: messages as recorded, tools only when the
// case has them, extra_vars as chat_template_kwargs.
ordered_json CaseBody(const ordered_json& c) {
  ordered_json body = ordered_json::object();
  body["messages"] = c.at("messages");
  body["add_generation_prompt"] = c.value("add_generation_prompt", true);
  if (c.contains("tools")) body["tools"] = c.at("tools");
  if (c.contains("extra_vars")) body["chat_template_kwargs"] = c.at("extra_vars");
  return body;
}

// Whether a case sends a content of parts: the server joins text parts
// before rendering, as llama-server does (issue 41), where jinja2 got the
// list; tests/jinja/conformance_test checks those renders on the engine.
bool HasTextParts(const ordered_json& c) {
  for (const ordered_json& m : c.at("messages")) {
    if (m.contains("content") && m.at("content").is_array()) return true;
  }
  return false;
}

TEST(ChatTemplateE2eTest, EveryCaseRendersAsJinja2Does) {
  const std::string dir = SharedPath("conformance/chat-templates");
  const std::string model = SharedPath("models/stories260K.gguf");
  if (!std::filesystem::is_directory(dir) || !std::filesystem::exists(model)) {
    GTEST_SKIP() << "missing " << dir << " or " << model;
  }
  setenv("KVAULT_FAKE_NOW", "2026-01-15T09:30:00", 1);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().string().ends_with(".cases.json")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  int total = 0, passed = 0, num_adapted = 0;
  for (const std::string& file : files) {
    const ordered_json spec = ReadJson(file);
    ASSERT_TRUE(spec.is_object()) << file;
    const std::string tpl = dir + "/" + spec.at("template").get<std::string>();
    SCOPED_TRACE(tpl);
    auto p = ServerProcess::Start({"-m", model, "-c", "256", "-np", "1",
                                   "-t", "1", "--chat-template-file", tpl});
    ASSERT_TRUE(p.ok()) << p.status();
    HttpClient client((*p)->port());
    for (const ordered_json& c : spec.at("cases")) {
      SCOPED_TRACE(c.at("id").get<std::string>());
      if (HasTextParts(c)) {
        ++num_adapted;
        continue;
      }
      ++total;
      Reply r = client.PostRaw("/apply-template", CaseBody(c).dump());
      if (c.contains("expect_error")) {
        EXPECT_GE(r.status, 400) << r.raw;
        EXPECT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
        passed += r.status >= 400 ? 1 : 0;
        continue;
      }
      ASSERT_EQ(r.status, 200) << r.raw;
      // Less a leading BOS: stories260K's tokenizer adds one, so the server
      // drops the template's (as llama-server does; issue 41).
      std::string want = c.at("expect").get<std::string>();
      if (want.starts_with(kBos)) want.erase(0, kBos.size());
      EXPECT_EQ(r.body["prompt"].get<std::string>(), want);
      passed += r.body["prompt"] == want ? 1 : 0;
    }
    EXPECT_EQ(StopServer(p->get()), "exit 0");
  }
  std::printf(
      "chat templates via /apply-template: %d/%d cases (%d with text parts "
      "left to tests/jinja)\n",
      passed, total, num_adapted);
  EXPECT_GT(total, 0);
}

}  // namespace
}  // namespace kvault::e2e
