#include "core/arg_table.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace kvault {
namespace {

constexpr ArgSpec kTable[] = {
    {"ctx-size", "-c --ctx-size", "", ArgKind::kValue, "N", "T_CTX",
     ArgUse::kServe, "common", "context size"},
    {"mmap", "--mmap", "--no-mmap", ArgKind::kSwitch, "", "T_MMAP",
     ArgUse::kServe, "common", "map the file"},
    {"gpu-layers", "-ngl --n-gpu-layers", "", ArgKind::kValue, "N", "T_NGL",
     ArgUse::kWarn, "common", "CPU only"},
    {"lora", "--lora", "", ArgKind::kValue, "FNAME", "T_LORA",
     ArgUse::kRefuse, "common", "no adapters"},
    {"metrics", "--metrics", "", ArgKind::kSwitch, "", "", ArgUse::kServe,
     "server", "a rather long description that has to be wrapped because it "
     "goes well past the seventy-nine columns a terminal shows"},
};

class ArgTableTest : public ::testing::Test {
 protected:
  StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args) {
    return ParseArgs(kTable, args, [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }
  std::map<std::string, std::string> env_;
};

TEST_F(ArgTableTest, ShortLongAndInlineFormsReachOneKey) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-c", "512"}, {"--ctx-size", "512"}, {"--ctx-size=512"}}) {
    auto parsed = Parse(args);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->flags.GetString("ctx-size", ""), "512");
  }
}

TEST_F(ArgTableTest, UnderscoresInLongNamesAreDashes) {
  auto parsed = Parse({"--ctx_size", "8", "--no_mmap"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->flags.GetString("ctx-size", ""), "8");
  EXPECT_FALSE(*parsed->flags.GetBool("mmap", true));
  EXPECT_FALSE(Parse({"-n_gl", "1"}).ok());  // short forms stay exact
}

TEST_F(ArgTableTest, ValueMayLookLikeAFlag) {
  auto parsed = Parse({"-c", "-1"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed->flags.GetInt("ctx-size", 0, -1, 10), -1);
}

TEST_F(ArgTableTest, SwitchOnAndOffFormsAndLastOneWins) {
  auto on = Parse({"--no-mmap", "--mmap"});
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(*on->flags.GetBool("mmap", false));
  auto off = Parse({"--mmap", "--no-mmap"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(*off->flags.GetBool("mmap", true));
  auto last = Parse({"-c", "1", "--ctx-size", "2"});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->flags.GetString("ctx-size", ""), "2");
}

TEST_F(ArgTableTest, ErrorsNameTheArgument) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--nope"}, "unknown flag '--nope'"},
      {{"-c"}, "flag -c needs a value (N)"},
      {{"--metrics=1"}, "flag --metrics takes no value, got '1'"},
      {{"model.gguf"},
       "unexpected argument 'model.gguf' (every argument is a flag)"},
      {{"--lora", "a.bin"}, "flag --lora is not supported by kvault: no "
                            "adapters"},
  };
  for (const Case& c : cases) {
    auto parsed = Parse(c.args);
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST_F(ArgTableTest, AcceptedWithoutEffectIsWarnedOnce) {
  auto parsed = Parse({"-ngl", "99", "--n-gpu-layers", "1"});
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->warnings.size(), 1u);
  EXPECT_EQ(parsed->warnings[0], "flag -ngl has no effect in kvault: CPU only");
}

TEST_F(ArgTableTest, EnvironmentFillsWhatTheCommandLineLeaves) {
  env_ = {{"T_CTX", "256"}, {"T_MMAP", "enabled"}};
  auto parsed = Parse({});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->flags.GetString("ctx-size", ""), "256");
  EXPECT_TRUE(*parsed->flags.GetBool("mmap", false));
  auto cli_wins = Parse({"-c", "64", "--no-mmap"});
  ASSERT_TRUE(cli_wins.ok());
  EXPECT_EQ(cli_wins->flags.GetString("ctx-size", ""), "64");
  EXPECT_FALSE(*cli_wins->flags.GetBool("mmap", true));
}

TEST_F(ArgTableTest, EnvironmentErrorsNameTheVariable) {
  env_ = {{"T_MMAP", "maybe"}};
  auto bad = Parse({});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "environment variable T_MMAP='maybe': expected true/false, 1/0, "
            "on/off or enabled/disabled");
  env_ = {{"T_LORA", "a.bin"}};
  auto refused = Parse({});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "environment variable T_LORA is not supported by kvault: no "
            "adapters");
}

TEST_F(ArgTableTest, HelpGroupsRowsAndWrapsAt79Columns) {
  const std::string help = ArgsHelp(kTable);
  EXPECT_NE(help.find("----- common -----\n  -c, --ctx-size N"),
            std::string::npos);
  EXPECT_NE(help.find("----- server -----\n  --metrics"), std::string::npos);
  EXPECT_NE(help.find("  --mmap, --no-mmap"), std::string::npos);
  EXPECT_NE(help.find("(env: T_CTX)"), std::string::npos);
  const size_t warn = help.find("----- accepted, without effect");
  const size_t refuse = help.find("----- refused");
  ASSERT_NE(warn, std::string::npos);
  ASSERT_NE(refuse, std::string::npos);
  EXPECT_LT(warn, help.find("-ngl, --n-gpu-layers N"));
  EXPECT_LT(refuse, help.find("--lora FNAME"));
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 79u) << line;
  }
}

}  // namespace
}  // namespace kvault
