#include "server/server_args.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvault {
namespace {

// Every spelling belongs to one row, and every row that is not served
// says why (the reason is what the user reads in the error or warning).
TEST(ServerArgTableTest, SpellingsAreUniqueAndEveryRowExplainsItself) {
  std::set<std::string> spellings;
  std::set<std::string> keys;
  for (const ArgSpec& spec : ServerArgTable()) {
    EXPECT_TRUE(keys.insert(std::string(spec.key)).second) << spec.key;
    EXPECT_FALSE(spec.help.empty()) << spec.key;
    EXPECT_FALSE(spec.names.empty()) << spec.key;
    std::string all = std::string(spec.names) + " " + std::string(spec.off_names);
    size_t i = 0;
    while (i < all.size()) {
      size_t j = all.find(' ', i);
      if (j == std::string::npos) j = all.size();
      if (j > i) {
        const std::string name = all.substr(i, j - i);
        EXPECT_EQ(name[0], '-') << spec.key;
        EXPECT_TRUE(spellings.insert(name).second) << name;
      }
      i = j + 1;
    }
  }
}

// The launch line llama.cpp's own server tests use starts kvault.
TEST(ServerArgTableTest, TheServerSuitesLaunchLineParses) {
  auto parsed = ParseArgs(
      ServerArgTable(),
      {"--host", "127.0.0.1", "--port", "8080", "--temp", "0.8", "--seed",
       "42", "--offline", "--model", "m.gguf", "--batch-size", "32",
       "--no-slots", "--alias", "tinyllama-2", "--ctx-size", "512",
       "--parallel", "2", "--n-predict", "64", "--no-jinja", "-fa", "on",
       "--metrics", "--kv-unified", "--cont-batching", "-ngl", "99"},
      [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->flags.GetString("ctx-size", ""), "512");
  EXPECT_EQ(parsed->flags.GetString("predict", ""), "64");
  EXPECT_EQ(parsed->flags.GetString("slots", ""), "false");
  EXPECT_EQ(parsed->warnings.size(), 2u);  // -fa and -ngl
}

// Flags kvault cannot honour are refused by name with the reason.
TEST(ServerArgTableTest, UnsupportedFeaturesAreRefusedByName) {
  for (const char* flag : {"--lora", "--model-draft", "--mmproj",
                           "--embedding", "--hf-repo"}) {
    std::vector<std::string> args = {flag};
    if (std::string(flag) != "--embedding") args.push_back("x");
    auto parsed = ParseArgs(ServerArgTable(), args,
                            [](const char*) -> const char* { return nullptr; });
    ASSERT_FALSE(parsed.ok()) << flag;
    EXPECT_NE(parsed.status().message().find(std::string("flag ") + flag +
                                             " is not supported by kvault: "),
              std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace kvault
