// The GBNF front end: every construct of the notation parses, and every
// malformed grammar is refused with its line, column, and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "grammar/grammar.h"

namespace kvault {
namespace {

std::string ErrorOf(std::string_view gbnf) {
  StatusOr<Grammar> g = Grammar::Parse(gbnf);
  if (g.ok()) return "OK";
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST(GbnfParserTest, ParsesEveryConstruct) {
  const char* kGbnf = R"(# a comment line
root ::= greeting ( " " name )+ tail? end  # trailing comment
greeting ::= "hi" | "hello" | "\x48\u00e9\U0001F600"
name ::= [A-Z] [a-z0-9_\-\]\\]* | [^ \n\t] . "é"
tail ::= (
    "," [0-9]{2}
  | ";" [0-9]{1,}
  | ":" [0-9]{0,3}
)
end ::= "\n" | "\r\t\"\\" | ""
)";
  StatusOr<Grammar> g = Grammar::Parse(kGbnf);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Accepts("hi Bob\n"));
  EXPECT_TRUE(g->Accepts("hello Al Zed,42"));
  EXPECT_TRUE(g->Accepts("hi xyé;123456\n"));
  EXPECT_TRUE(g->Accepts("H\xC3\xA9\xF0\x9F\x98\x80 A]\\-\r\t\"\\"));
  EXPECT_TRUE(g->Accepts("hi A:"));
  EXPECT_FALSE(g->Accepts("hi A,4"));         // {2} needs two digits
  EXPECT_FALSE(g->Accepts("hi A:1234"));      // {0,3} allows three at most
  EXPECT_FALSE(g->Accepts("hi"));             // ( ... )+ needs one name
  EXPECT_FALSE(g->Accepts("hi  x\xC3\xA9"));  // ' ' is excluded by [^ \n\t]
}

TEST(GbnfParserTest, CustomRootName) {
  StatusOr<Grammar> g = Grammar::Parse("start ::= \"a\"+\n", "start");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Accepts("aaa"));
  EXPECT_EQ(ErrorOf("start ::= \"a\"\n"),
            "grammar: missing 'root' rule (the start rule)");
}

TEST(GbnfParserTest, UnclosedGroupNamesBothPositions) {
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nb ::= \"x\"\nc ::= \"y\" ( \"z\" | b"),
            "grammar:3:20: expected ')' to close the group opened at 3:11, "
            "found end of input");
}

TEST(GbnfParserTest, ErrorsCarryLineAndColumn) {
  EXPECT_EQ(ErrorOf(""), "grammar: the grammar is empty (no rules)");
  EXPECT_EQ(ErrorOf("  # only a comment\n\n"),
            "grammar: the grammar is empty (no rules)");
  EXPECT_EQ(ErrorOf("root ::= foo\n"), "grammar:1:10: undefined rule 'foo'");
  EXPECT_EQ(ErrorOf("a ::= \"x\"\n"),
            "grammar: missing 'root' rule (the start rule)");
  EXPECT_EQ(ErrorOf("root = \"x\"\n"),
            "grammar:1:6: expected '::=' after rule name 'root', found '='");
  EXPECT_EQ(ErrorOf("root ::= \"abc\n"),
            "grammar:1:14: expected '\"' to close the string opened at 1:10, "
            "found end of line");
  EXPECT_EQ(ErrorOf("root ::= [a-z\n"),
            "grammar:1:14: expected ']' to close the character class opened "
            "at 1:10, found end of line");
  EXPECT_EQ(ErrorOf("root ::= \"a\" )\n"),
            "grammar:1:14: expected an element, '|' or end of line in rule "
            "'root', found ')'");
  EXPECT_EQ(ErrorOf("root ::= \"\\q\"\n"),
            "grammar:1:11: expected an escape (\\n \\r \\t \\\\ \\\" \\[ \\] "
            "\\xHH \\uHHHH \\UHHHHHHHH), found '\\q'");
  EXPECT_EQ(ErrorOf("root ::= \"\\x4\"\n"),
            "grammar:1:14: expected 2 hex digits after '\\x', found '\"'");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{2,1}\n"),
            "grammar:1:13: repetition {2,1} has max below min");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{2\n"),
            "grammar:2:1: expected '}' to close the repetition opened at "
            "1:13, found end of input");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{,3}\n"),
            "grammar:1:14: expected a repetition count, found ','");
  EXPECT_EQ(ErrorOf("root ::= [z-a]\n"),
            "grammar:1:11: character range is reversed (end before start)");
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nroot ::= \"b\"\n"),
            "grammar:2:1: rule 'root' is defined twice (first at 1:1)");
  EXPECT_EQ(ErrorOf("root ::= <[123]>\n"),
            "grammar:1:10: token references (<[id]> or <token>) are not "
            "supported; use a string literal");
  EXPECT_EQ(ErrorOf("root ::= \"a\" b ::= \"c\"\n"),
            "grammar:1:14: expected end of line before the definition of 'b', "
            "found 'b ::='");
}

TEST(GbnfParserTest, RefusesHugeRepetitionCounts) {
  EXPECT_EQ(ErrorOf("root ::= \"a\"{0,100000}\n"),
            "grammar:1:16: repetition count 100000 exceeds the limit of "
            "10000");
  // The limit itself is fine and stays linear in size.
  StatusOr<Grammar> g = Grammar::Parse("root ::= [a-z]{0,10000}\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Accepts(std::string(10000, 'q')));
  EXPECT_FALSE(g->Accepts(std::string(10001, 'q')));
}

TEST(GbnfParserTest, RefusesGrammarsTooLargeAfterExpansion) {
  // Each level multiplies nothing (groups become rules) but the sum of
  // many {10000} copies grows; the builder's element budget stops it.
  std::string gbnf = "root ::= x\nx ::= ";
  for (int i = 0; i < 300; ++i) gbnf += "[a]{10000} ";
  gbnf += "\n";
  const std::string err = ErrorOf(gbnf);
  EXPECT_NE(err.find("grammar too large"), std::string::npos) << err;
}

TEST(GbnfParserTest, RefusesDeepNesting) {
  const std::string gbnf =
      "root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')');
  EXPECT_NE(ErrorOf(gbnf).find("parentheses nested deeper than 200"),
            std::string::npos);
}

TEST(GbnfParserTest, RefusesLeftRecursionNamingTheCycle) {
  EXPECT_EQ(ErrorOf("root ::= expr\nexpr ::= expr \"+\" term | term\n"
                    "term ::= [0-9]\n"),
            "grammar:2:1: rule 'expr' is left-recursive (expr -> expr); a "
            "stack-based matcher cannot run left recursion: rewrite it with "
            "repetition, e.g. expr ::= term (\"+\" term)*");
  // Indirect, and through a nullable prefix.
  EXPECT_NE(
      ErrorOf("root ::= a\na ::= b \"x\"\nb ::= ws a | \"y\"\nws ::= \" \"?\n")
          .find("(a -> b -> a)"),
      std::string::npos);
  // A repetition of something that may be empty loops without input.
  EXPECT_NE(ErrorOf("root ::= (\"a\"?)*\n").find("left-recursive"),
            std::string::npos);
  // Right recursion is fine.
  EXPECT_EQ(ErrorOf("root ::= \"a\" root | \"b\"\n"), "OK");
}

std::filesystem::path GrammarDir() {
  return std::filesystem::path(KVAULT_SOURCE_DIR) / ".." / "shared" /
         "conformance" / "grammars";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GbnfParserTest, EveryConformanceGrammarParses) {
  if (!std::filesystem::exists(GrammarDir())) {
    GTEST_SKIP() << "no conformance grammars at " << GrammarDir();
  }
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GrammarDir())) {
    if (entry.path().extension() != ".gbnf") continue;
    StatusOr<Grammar> g = Grammar::Parse(ReadFile(entry.path()));
    EXPECT_TRUE(g.ok()) << entry.path() << ": " << g.status();
    ++parsed;
  }
  EXPECT_EQ(parsed, 8);
}

}  // namespace
}  // namespace kvault
