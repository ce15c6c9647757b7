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
                                  std::string(255, 'x')};
  for (const std::string& name : accepted) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(ValidateSlotFilename(name).ok()) << ValidateSlotFilename(name);
  }
}

TEST(SlotFilenameTest, RejectsUnsafeNamesWithReason) {
  const std::string rejected[] = {
      "",                     // empty
      std::string(256, 'x'),  // too long
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
