#include "chat/json_healer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/scanner.h"

namespace kvault::chat {
namespace {

// The contract: for every prefix of a JSON text that leaves a container
// open, the healed text parses, and its dump cut at the marker is a prefix
// of the finished text's dump.
void ExpectPrefixesHeal(const std::string& text) {
  const std::string final_dump = DumpJson(ParseJsonOrDiscard(text));
  ASSERT_NE(final_dump, "null") << text;
  std::string last_cut;
  for (size_t n = 1; n < text.size(); ++n) {
    const std::string prefix = text.substr(0, n);
    std::optional<HealedJson> h = HealJson(prefix);
    ASSERT_TRUE(h.has_value()) << prefix;
    auto healed = ParseJsonOrDiscard(h->text);
    ASSERT_FALSE(healed.is_discarded()) << prefix << " -> " << h->text;
    std::optional<std::string> cut = CutAtHeal(DumpJson(healed), h->cut);
    ASSERT_TRUE(cut.has_value()) << prefix << " -> " << h->text;
    EXPECT_EQ(final_dump.compare(0, cut->size(), *cut), 0)
        << "prefix [" << prefix << "] shows [" << *cut << "], not a prefix of ["
        << final_dump << "]";
    EXPECT_GE(cut->size(), last_cut.size()) << prefix;  // it only grows
    last_cut = *cut;
  }
}

TEST(JsonHealerTest, EveryPrefixShowsAPrefixOfTheFinishedDump) {
  const std::vector<std::string> texts = {
      R"({"location": "Paris", "unit": "c"})",
      R"({"n": 12.50, "big": -3e5, "ok": true, "none": null, "f": false})",
      R"({"list": [1, [2, {"x": "y"}], "z"], "empty": {}, "e": []})",
      R"({"esc": "a\"b\\c\n\u00e9\ud83d\ude00", "k\u00e9y": "v"})",
      "{\"utf8\": \"\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\"}",
      R"([{"name": "f", "arguments": {"a": 1}}, {"name": "g"}])",
      R"(  { "spaced" :  [ 1 , 2 ] , "t" : "x" }  )"};
  for (const std::string& t : texts) {
    SCOPED_TRACE(t);
    ExpectPrefixesHeal(std::string(TrimSpace(t)));
  }
}

TEST(JsonHealerTest, FinishedOrNonJsonTextIsNotHealed) {
  EXPECT_FALSE(HealJson(R"({"a": 1})").has_value());
  EXPECT_FALSE(HealJson("hello").has_value());
  EXPECT_FALSE(HealJson(R"({"a" 1)").has_value());  // no colon
  EXPECT_FALSE(HealJson(R"({"a": 1]")").has_value());
}

TEST(JsonHealerTest, UnfinishedWordsAndEscapesAreLeftForLater) {
  auto shown = [](const std::string& prefix) {
    std::optional<HealedJson> h = HealJson(prefix);
    EXPECT_TRUE(h.has_value()) << prefix;
    return *CutAtHeal(DumpJson(ParseJsonOrDiscard(h->text)), h->cut);
  };
  EXPECT_EQ(shown(R"({"n": 12)"), R"({"n":)");
  EXPECT_EQ(shown(R"({"b": tr)"), R"({"b":)");
  EXPECT_EQ(shown(R"({"s": "ab\)"), R"({"s":"ab)");
  EXPECT_EQ(shown(R"({"s": "ab\u00)"), R"({"s":"ab)");
  EXPECT_EQ(shown("{\"s\": \"a\xE6\x97"), R"({"s":"a)");
  EXPECT_EQ(shown(R"({"a": 1, )"), R"({"a":1,)");
  EXPECT_EQ(shown(R"({"ke)"), R"({"ke)");
  EXPECT_EQ(shown(R"({"key")"), R"({"key":)");
}

}  // namespace
}  // namespace kvault::chat
