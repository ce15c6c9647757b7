// The kvault binary's top-level command line, run as a user would.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "server_process.h"

namespace kvault::e2e {
namespace {

// Regression (issue 41): `kvault --version` was "unknown command"; it
// answers as `kvault serve --version` does.
TEST(CommandLineE2eTest, VersionAtTopLevelAndUnderServe) {
  const CommandRun top = Kvault("--version");
  const CommandRun serve = Kvault("serve --version");
  EXPECT_EQ(top.exit_code, 0) << top.output;
  EXPECT_EQ(serve.exit_code, 0) << serve.output;
  EXPECT_EQ(top.output, serve.output);
  EXPECT_EQ(top.output.rfind("kvault ", 0), 0u) << top.output;
  const CommandRun unknown = Kvault("--no-such-thing");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown command '--no-such-thing'"),
            std::string::npos)
      << unknown.output;
}

// Regression (issue 41): a bad --chat-template-file was reported as
// "flag --chat-template"; the error names the flag and the file.
TEST(CommandLineE2eTest, ABadChatTemplateFileIsNamed) {
  const std::string dir = MakeTempDir("template");
  const std::string bad = dir + "/bad.jinja";
  std::ofstream(bad) << "{% if %}";
  for (const std::string& path : {bad, dir + "/missing.jinja"}) {
    const CommandRun r =
        Kvault("serve --demo-random --chat-template-file " + path);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("flag --chat-template-file '" + path + "'"),
              std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace kvault::e2e
