#include "server/slot_filename.h"

#include <gtest/gtest.h>

#include <string>

namespace kvault {
namespace {

TEST(SlotFilenameTest, AcceptsPortableNames) {
  const std::string accepted[] = {"slot0.bin",
                                  "a",
                                  "conversation-42_v2.kvs",
                                  "über.bin",
                                  "日本語.state",
                                  "name with spaces.bin",
                                  ".hidden",
                                  "a.tmp-notes.bin",
                                  std::string(234, 'x')};
  for (const std::string& name : accepted) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(ValidateSlotFilename(name).ok()) << ValidateSlotFilename(name);
  }
}

// Regression (issue 17): names of 235-255 bytes passed and the save then
// failed with a 500; the message must name the limit.
TEST(SlotFilenameTest, TooLongNameNamesTheRealLimit) {
  const Status s = ValidateSlotFilename(std::string(240, 'x'));
  EXPECT_EQ(s.reason(), "invalid_filename");
  EXPECT_EQ(s.message(),
            "Invalid filename: 240 bytes, at most 234 allowed (255 minus the "
            "21 bytes of the temporary name a save writes first)");
}

// Regression (issue 17): a temporary file left by kill -9 could be
// restored by name.
TEST(SlotFilenameTest, RejectsTemporaryFileNames) {
  for (const char* name : {"conv.bin.tmp-0000a1b20000000c",
                           "conv.bin.tmp-1764750000123-7", "x.tmp-1"}) {
    SCOPED_TRACE(name);
    const Status s = ValidateSlotFilename(name);
    EXPECT_EQ(s.reason(), "invalid_filename");
    EXPECT_NE(s.message().find("temporary file name"), std::string_view::npos)
        << s;
  }
}

TEST(SlotFilenameTest, RejectsUnsafeNamesWithReason) {
  const std::string rejected[] = {
      "",                     // empty
      std::string(235, 'x'),  // too long for the temporary name
      std::string(255, 'x'),  // NAME_MAX itself: the temporary name breaks it
      "a/b",
      "/etc/passwd",
      "a\\b",  // separators
      "..",
      "a..b",
      "../x",  // parent references
      "a:b",
      "a*b",
      "a?b",
      "a\"b",
      "a<b",
      "a>b",
      "a|b",
      std::string("a\0b", 3),  // NUL
      "a\nb",
      "a\tb",
      "a\x7f"
      "b",
      "a\xc2\x85"
      "b",  // C1 control U+0085
      "a\xe2\x88\x95"
      "b",  // U+2215 division slash
      "a\xef\xbc\x8e"
      "b",  // U+FF0E fullwidth full stop
      "a\xef\xbb\xbf"
      "b",  // BOM
      "a\xef\xbf\xbd"
      "b",  // U+FFFD
      "a\xff"
      "b",      // invalid UTF-8
      "a\xc3",  // truncated UTF-8
      "a\xed\xa0\x80"
      "b",  // encoded surrogate
      " lead",
      "trail ",
      "trail.",
  };
  for (const std::string& name : rejected) {
    SCOPED_TRACE(testing::PrintToString(name));
    Status s = ValidateSlotFilename(name);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.reason(), "invalid_filename");
    EXPECT_EQ(std::string(s.message()).rfind("Invalid filename", 0), 0u)
        << s.message();
  }
}

TEST(SlotFilenameTest, MessageSaysWhy) {
  EXPECT_NE(ValidateSlotFilename("a/b").message().find("'/'"),
            std::string_view::npos);
  EXPECT_NE(ValidateSlotFilename(std::string(300, 'x')).message().find("300"),
            std::string_view::npos);
}

}  // namespace
}  // namespace kvault
