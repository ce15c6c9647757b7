// HugePageBuffer: zeroed, huge-page aligned, writable until made read-only,
// and moved without copying or double unmapping.
#include "core/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace kvault {
namespace {

bool AllZero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(HugePageBufferTest, IsZeroedAlignedAndWritable) {
  // Past one huge page and not a multiple of a small one.
  const size_t n = HugePageBuffer::kHugePageBytes + 12345;
  auto buffer = HugePageBuffer::Allocate(n);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  ASSERT_NE(buffer->data(), nullptr);
  EXPECT_EQ(buffer->size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) %
                HugePageBuffer::kHugePageBytes,
            0u);
  EXPECT_TRUE(AllZero(buffer->data(), n));
  buffer->data()[0] = std::byte{1};
  buffer->data()[n - 1] = std::byte{2};
  EXPECT_EQ(buffer->data()[n - 1], std::byte{2});
  EXPECT_TRUE(buffer->MakeReadOnly().ok());
  EXPECT_EQ(buffer->data()[0], std::byte{1});  // reads still work
}

TEST(HugePageBufferTest, ZeroBytesIsEmpty) {
  auto buffer = HugePageBuffer::Allocate(0);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->data(), nullptr);
  EXPECT_EQ(buffer->size(), 0u);
  EXPECT_TRUE(buffer->MakeReadOnly().ok());
}

TEST(HugePageBufferTest, MoveTransfersTheMemory) {
  auto a = HugePageBuffer::Allocate(4096);
  ASSERT_TRUE(a.ok());
  a->data()[10] = std::byte{7};
  std::byte* const data = a->data();
  HugePageBuffer b = std::move(*a);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 4096u);
  EXPECT_EQ(a->data(), nullptr);  // NOLINT(bugprone-use-after-move)
  HugePageBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  EXPECT_EQ(c.data()[10], std::byte{7});
}

TEST(HugePageBufferTest, ImpossibleSizeIsResourceExhausted) {
  for (size_t n : {size_t{1} << 62, SIZE_MAX}) {
    auto buffer = HugePageBuffer::Allocate(n);
    ASSERT_FALSE(buffer.ok());
    EXPECT_TRUE(buffer.status().IsResourceExhausted())
        << buffer.status().ToString();
  }
}

}  // namespace
}  // namespace kvault
