#include "server/grammar_compiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace kvault {
namespace {

// A JSON-schema source too large to compile inline.
GrammarSource LargeEnum(bool hold) {
  GrammarSource source;
  source.field = "json_schema";
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < 5000; ++i) values.push_back("v" + std::to_string(i));
  source.schema = {{"enum", values}};
  source.hold_for_test = hold;
  return source;
}

// A request whose connection reports `ending` as soon as it is waited on
// (the client gone, the server stopping); kReady waits for the event
// itself, for at most 30 s.
HttpRequest RequestThatSees(WaitResult ending) {
  HttpRequest req;
  req.wait = [ending](int fd, WaitAlso, WaitClock::time_point) {
    if (ending != WaitResult::kReady) return ending;
    return WaitForFd(fd, WaitClock::now() + std::chrono::seconds(30));
  };
  return req;
}

TEST(GrammarCompilerTest, CompilesLargeAndSmallSources) {
  GrammarCompiler compiler(1, false);
  const HttpRequest req = RequestThatSees(WaitResult::kReady);
  StatusOr<CompiledGrammar> large = compiler.Compile(req, LargeEnum(false));
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_TRUE(large->grammar->Accepts("\"v4999\""));
  EXPECT_FALSE(large->grammar->Accepts("\"v5000\""));
  GrammarSource small;
  small.field = "grammar";
  small.gbnf = "root ::= \"yes\" | \"no\"";
  StatusOr<CompiledGrammar> inline_one = compiler.Compile(req, small);
  ASSERT_TRUE(inline_one.ok()) << inline_one.status();
  EXPECT_TRUE(inline_one->grammar->Accepts("no"));
  GrammarSource bad;
  bad.field = "grammar";
  bad.gbnf = "root ::= (" + std::string(20000, 'x');
  EXPECT_EQ(compiler.Compile(req, bad).status().reason(), "invalid_grammar");
  const GrammarCompileStats stats = compiler.Stats();
  EXPECT_EQ(stats.num_compiled, 1u);  // the small one compiled inline
  EXPECT_EQ(stats.num_refused, 1u);
  EXPECT_EQ(stats.num_cancelled, 0u);
}

// Regression (issue 40): a compile went on after its client left and held
// shutdown. A held compile (it would never end by itself) ends as soon as
// its client goes or the server stops, and frees its thread: the one
// thread then compiles the next source.
TEST(GrammarCompilerTest, ClientGoneOrStoppingCancelsTheCompile) {
  GrammarCompiler compiler(1, /*test_hooks=*/true);
  StatusOr<CompiledGrammar> gone = compiler.Compile(
      RequestThatSees(WaitResult::kClientGone), LargeEnum(true));
  EXPECT_EQ(gone.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(gone.status().reason(), "client_closed");
  StatusOr<CompiledGrammar> stopping = compiler.Compile(
      RequestThatSees(WaitResult::kStopping), LargeEnum(true));
  EXPECT_EQ(stopping.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(stopping.status().reason(), "server_stopping");
  StatusOr<CompiledGrammar> next =
      compiler.Compile(RequestThatSees(WaitResult::kReady), LargeEnum(false));
  ASSERT_TRUE(next.ok()) << next.status();
  const GrammarCompileStats stats = compiler.Stats();
  EXPECT_EQ(stats.num_cancelled, 2u);
  EXPECT_EQ(stats.num_compiled, 1u);
}

TEST(GrammarCompilerTest, HoldIsIgnoredWithoutTestHooks) {
  GrammarCompiler compiler(1, /*test_hooks=*/false);
  StatusOr<CompiledGrammar> r =
      compiler.Compile(RequestThatSees(WaitResult::kReady), LargeEnum(true));
  ASSERT_TRUE(r.ok()) << r.status();
}

}  // namespace
}  // namespace kvault
