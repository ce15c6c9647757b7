// Grammar-constrained generation on real models through the real server:
// every grammar in ../shared/conformance/grammars, 20 seeds at temperature
// 1.0, on stories260K and on the small Q8_0 model of docs/benchmarks.md.
// Each output is checked by the project's own recogniser: an output that
// ended at end-of-generation is a whole sentence of the grammar; one cut at
// n_predict is a prefix of a sentence (the matcher accepts all its bytes).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/sanitizers.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

#if !KVAULT_ADDRESS_SANITIZER
constexpr int kSeeds = 20;
constexpr int kNPredict = 64;
#else  // the Debug ASan build decodes ~20x slower: a smaller sample there
constexpr int kSeeds = 4;
constexpr int kNPredict = 16;
#endif

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `kvault gen-model` for the small Q8_0 model of docs/benchmarks.md
// into `dir`; returns its path, or "" when it failed (the log in `error`).
std::string MakeSmallQ8Model(const std::string& dir, std::string* error) {
  const std::string out = dir + "/small-q8.gguf";
  const std::string cmd =
      std::string(KVAULT_BINARY) +
      " gen-model --arch llama --n-embd 512 --n-layer 8 --n-head 8"
      " --n-head-kv 4 --n-ff 1408 --ctx 2048 --type q8_0 --vocab " +
      SharedPath("vocab/ggml-vocab-llama-spm.gguf") + " --seed 1 -o " + out +
      " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) error->append(buf, n);
  return ::pclose(p) == 0 ? out : "";
}

struct ModelCase {
  friend void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }
  const char* name;
  bool generated;  // made by gen-model, else a file in ../shared/models
};

class GrammarGenerationE2eTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    const std::string grammars = SharedPath("conformance/grammars");
    if (!std::filesystem::is_directory(grammars)) {
      GTEST_SKIP() << "no ../shared/conformance/grammars";
    }
    for (const auto& e : std::filesystem::directory_iterator(grammars)) {
      if (e.path().extension() == ".gbnf") {
        grammars_[e.path().stem().string()] = ReadFile(e.path().string());
      }
    }
    ASSERT_GE(grammars_.size(), 8u);
    std::string model = SharedPath(std::string("models/") + GetParam().name);
    std::string dir;
    if (GetParam().generated) {
      std::string log;
      dir = MakeTempDir("grammar_e2e");
      model = MakeSmallQ8Model(dir, &log);
      ASSERT_FALSE(model.empty()) << log;
    }
    auto server =
        ServerProcess::Start({"-m", model, "-np", "2", "-c", "2048", "-t", "2"});
    // The server has loaded the weights; the 60 MB file can go.
    if (!dir.empty()) std::filesystem::remove_all(dir);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::map<std::string, std::string> grammars_;
  std::unique_ptr<ServerProcess> server_;
};

// Checks one reply; returns "" or what is wrong.
std::string CheckOutput(const std::shared_ptr<const Grammar>& grammar,
                        const nlohmann::json& body) {
  const std::string content = body.value("content", "");
  const std::string stop = body.value("stop_type", "");
  if (stop == "eos") {
    return grammar->Accepts(content) ? "" : "ended but not a sentence";
  }
  if (stop != "limit") return "stop_type " + stop;
  if (body.value("tokens_predicted", 0) != kNPredict) {
    return "cut before n_predict";
  }
  GrammarMatcher matcher(grammar);
  return matcher.AcceptBytes(content) ? "" : "not a prefix of a sentence";
}

TEST_P(GrammarGenerationE2eTest, EveryOutputIsInTheGrammar) {
  HttpClient client(server_->port());
  for (const auto& [name, text] : grammars_) {
    auto parsed = Grammar::Parse(text);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    auto grammar = std::make_shared<const Grammar>(std::move(*parsed));
    std::map<std::string, int> stops;
    for (int seed = 1; seed <= kSeeds; ++seed) {
      Reply r = client.Post(
          "/completion", {{"prompt", "Once upon a time"},
                          {"n_predict", kNPredict},
                          {"temperature", 1.0},
                          {"seed", seed},
                          {"grammar", text}});
      ASSERT_EQ(r.status, 200) << name << " seed " << seed << ": " << r.raw;
      EXPECT_EQ(CheckOutput(grammar, r.body), "")
          << name << " seed " << seed << ": " << r.body["content"].dump();
      ++stops[r.body.value("stop_type", "")];
    }
    std::printf("%s %s: %d ended, %d cut at n_predict\n", GetParam().name,
                name.c_str(), stops["eos"], stops["limit"]);
  }
}

// A finite grammar must end every generation at end-of-generation with one
// of its sentences, whatever the seed (the sampler may not run on).
TEST_P(GrammarGenerationE2eTest, FiniteGrammarAlwaysEndsWithASentence) {
  const std::string text =
      "root ::= (\"yes\" | \"no\" | \"maybe, \" [0-9]{1,2} \"%\") \".\"";
  auto parsed = Grammar::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  HttpClient client(server_->port());
  for (int seed = 1; seed <= kSeeds; ++seed) {
    Reply r = client.Post("/completion", {{"prompt", "Once upon a time"},
                                          {"n_predict", kNPredict},
                                          {"temperature", 1.0},
                                          {"seed", seed},
                                          {"grammar", text}});
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body.value("stop_type", ""), "eos") << r.raw;
    EXPECT_TRUE(parsed->Accepts(r.body.value("content", ""))) << r.raw;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GrammarGenerationE2eTest,
    ::testing::Values(ModelCase{"stories260K.gguf", false},
                      ModelCase{"small-q8_0", true}),
    [](const auto& info) {
      return std::string(info.param.generated ? "SmallQ8_0" : "Stories260K");
    });

}  // namespace
}  // namespace kvault::e2e
