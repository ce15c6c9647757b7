#include "core/memory_file.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

namespace kvault {
namespace {

TEST(StringWritableFileTest, AppendsAndRefusesAfterClose) {
  std::string out;
  StringWritableFile file(&out);
  ASSERT_TRUE(file.Append(std::string_view("abc")).ok());
  ASSERT_TRUE(file.Append(std::string_view("de")).ok());
  ASSERT_TRUE(file.Sync().ok());
  ASSERT_TRUE(file.Close().ok());
  EXPECT_EQ(out, "abcde");
  EXPECT_EQ(file.Append(std::string_view("x")).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(out, "abcde");
}

TEST(StringRandomAccessFileTest, ReadsAtOffsetsAndShortAtEnd) {
  StringRandomAccessFile file(std::make_shared<const std::string>("hello"));
  EXPECT_EQ(file.size(), 5u);
  std::array<std::byte, 4> buf{};
  StatusOr<size_t> n = file.ReadAt(3, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(static_cast<char>(buf[0]), 'l');
  EXPECT_EQ(static_cast<char>(buf[1]), 'o');
  n = file.ReadAt(9, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

}  // namespace
}  // namespace kvault
