#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

TEST(StopMatcherTest, HoldsBackAPossibleStopStart) {
  StopMatcher m({"END"});
  auto a = m.Push("hello E");
  EXPECT_EQ(a.text, "hello ");
  EXPECT_FALSE(a.match);
  auto b = m.Push("N");
  EXPECT_EQ(b.text, "");
  auto c = m.Push("x");  // not a stop after all: released
  EXPECT_EQ(c.text, "ENx");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, MatchDropsTheStopAndEverythingAfter) {
  StopMatcher m({"\n\n", "User:"});
  EXPECT_EQ(m.Push("answer. Us").text, "answer. ");
  auto out = m.Push("er: more");
  ASSERT_TRUE(out.match);
  EXPECT_EQ(*out.match, "User:");
  EXPECT_EQ(out.text, "");  // "Us" was held back, never released
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.Push("late").text, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, EarliestMatchWins) {
  StopMatcher m({"cd", "bcd"});
  auto out = m.Push("abcde");
  ASSERT_TRUE(out.match);
  EXPECT_EQ(*out.match, "bcd");
  EXPECT_EQ(out.text, "a");
}

TEST(StopMatcherTest, FlushReleasesHeldText) {
  StopMatcher m({"stop"});
  EXPECT_EQ(m.Push("a st").text, "a ");
  EXPECT_EQ(m.Flush(), "st");
}

TEST(StopMatcherTest, NeverSplitsAUtf8Character) {
  // "é" is C3 A9; a stop string starting with A9 (invalid alone) must not
  // make the matcher release half of the character.
  StopMatcher m({std::string("\xA9x")});
  auto out = m.Push("caf\xC3\xA9");
  EXPECT_EQ(out.text, "caf");
  EXPECT_EQ(m.Flush(), "\xC3\xA9");
}

TEST(StopMatcherTest, NoStopsReleasesEverything) {
  StopMatcher m({"", ""});
  EXPECT_EQ(m.Push("abc").text, "abc");
}

}  // namespace
}  // namespace kvault
