#include "core/flags.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

StatusOr<Flags> ParseArgs(std::vector<std::string> args) {
  return Flags::Parse(args, {"json", "verbose"});
}

TEST(FlagsTest, ParsesValuedBooleanAndPositional) {
  auto flags = ParseArgs({"alloc-churn", "--cells", "64", "--json",
                          "--policy=paged", "--policy", "contiguous"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->positional(), std::vector<std::string>{"alloc-churn"});
  EXPECT_EQ(*flags->GetUint("cells", 0), 64u);
  EXPECT_TRUE(flags->Has("json"));
  EXPECT_FALSE(flags->Has("verbose"));
  EXPECT_EQ(flags->GetAll("policy"),
            (std::vector<std::string>{"paged", "contiguous"}));
  EXPECT_EQ(flags->GetString("missing", "dflt"), "dflt");
}

TEST(FlagsTest, MissingValueIsAnError) {
  auto flags = ParseArgs({"--cells"});
  EXPECT_EQ(flags.status().message(), "flag --cells needs a value");
}

TEST(FlagsTest, BadIntegersNameTheFlagAndValue) {
  auto flags = ParseArgs({"--cells", "12x", "--slots", "0"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->GetUint("cells", 1).status().message(),
            "flag --cells: expected an unsigned integer, got '12x'");
  EXPECT_EQ(flags->GetUint("slots", 1, 1, 8).status().message(),
            "flag --slots: 0 is outside [1, 8]");
}

TEST(FlagsTest, DoublesAndUnknownFlags) {
  auto flags = ParseArgs({"--temp", "0.5", "--tmep", "1"});
  ASSERT_TRUE(flags.ok());
  EXPECT_DOUBLE_EQ(*flags->GetDouble("temp", 0), 0.5);
  EXPECT_EQ(flags->CheckKnown({"temp"}).message(), "unknown flag --tmep");
  EXPECT_FALSE(ParseArgs({"--temp", "abc"})->GetDouble("temp", 0).ok());
}

TEST(FlagsTest, RepeatedUnsignedValues) {
  auto flags = ParseArgs({"--page-size", "1", "--page-size", "16"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags->GetAllUint("page-size", 1, 256),
            (std::vector<uint64_t>{1, 16}));
  EXPECT_TRUE(flags->GetAllUint("absent")->empty());
  EXPECT_EQ(ParseArgs({"--page-size", "512"})
                ->GetAllUint("page-size", 1, 256)
                .status()
                .message(),
            "flag --page-size: 512 is outside [1, 256]");
}

}  // namespace
}  // namespace kvault
