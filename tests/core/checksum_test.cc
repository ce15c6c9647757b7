#include "core/checksum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kvault {
namespace {

std::vector<std::byte> RandomBytes(size_t num_bytes, std::mt19937_64& rng) {
  std::vector<std::byte> out(num_bytes);
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  return out;
}

TEST(ChecksumTest, EmptyInputHasTheReferenceHash) {
  // XXH3-64 of zero bytes with seed 0, from the xxHash reference.
  constexpr uint64_t kEmpty = 0x2D06800538D394C2ull;
  EXPECT_EQ(Xxh3_64(std::span<const std::byte>()), kEmpty);
  EXPECT_EQ(Xxh3_64(nullptr, 0), kEmpty);
  Xxh3Hasher hasher;
  EXPECT_EQ(hasher.Digest(), kEmpty);
  hasher.Update(nullptr, 0);
  EXPECT_EQ(hasher.Digest(), kEmpty);
}

TEST(ChecksumTest, PinnedValueGuardsAgainstSeedOrVariantChanges) {
  // On-disk records depend on this exact function (XXH3-64, seed 0).
  EXPECT_EQ(Xxh3_64("a", 1), 0xE6C632B61E964E1Full);
}

TEST(ChecksumTest, SpanAndPointerOverloadsAgree) {
  std::mt19937_64 rng(7);
  const std::vector<std::byte> data = RandomBytes(1000, rng);
  EXPECT_EQ(Xxh3_64(data), Xxh3_64(data.data(), data.size()));
}

TEST(ChecksumTest, StreamingEqualsOneShotAtEverySplit) {
  const uint64_t seed = 20240601;
  std::mt19937_64 rng(seed);
  // Sizes straddle XXH3's internal boundaries (16, 128, 240 bytes, stripes).
  for (size_t num_bytes : {1, 15, 16, 17, 128, 129, 240, 241, 1024, 4097}) {
    const std::vector<std::byte> data = RandomBytes(num_bytes, rng);
    const uint64_t one_shot = Xxh3_64(data);
    for (size_t split = 0; split <= num_bytes; split += 1 + num_bytes / 37) {
      Xxh3Hasher hasher;
      hasher.Update(data.data(), split);
      hasher.Update(data.data() + split, num_bytes - split);
      ASSERT_EQ(hasher.Digest(), one_shot)
          << "seed " << seed << " size " << num_bytes << " split " << split;
    }
  }
}

TEST(ChecksumTest, ManySmallUpdatesEqualOneShot) {
  const uint64_t seed = 99;
  std::mt19937_64 rng(seed);
  const std::vector<std::byte> data = RandomBytes(5000, rng);
  Xxh3Hasher hasher;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t n = std::min<size_t>(rng() % 300, data.size() - pos);
    hasher.Update(data.data() + pos, n);
    pos += n;
  }
  EXPECT_EQ(hasher.Digest(), Xxh3_64(data)) << "seed " << seed;
}

TEST(ChecksumTest, ChangingAnyByteChangesTheHash) {
  std::mt19937_64 rng(3);
  std::vector<std::byte> data = RandomBytes(300, rng);
  const uint64_t original = Xxh3_64(data);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] ^= std::byte{0x01};
    ASSERT_NE(Xxh3_64(data), original) << "flipped byte " << i;
    data[i] ^= std::byte{0x01};
  }
  EXPECT_EQ(Xxh3_64(data), original);
  // A truncation is a change too.
  EXPECT_NE(Xxh3_64(std::span(data).first(data.size() - 1)), original);
}

TEST(ChecksumTest, DigestDoesNotResetButResetDoes) {
  const char kText[] = "hello world";
  Xxh3Hasher hasher;
  hasher.Update(kText, 5);
  const uint64_t first = hasher.Digest();
  EXPECT_EQ(hasher.Digest(), first);
  EXPECT_EQ(first, Xxh3_64(kText, 5));
  hasher.Update(kText + 5, 6);
  EXPECT_EQ(hasher.Digest(), Xxh3_64(kText, 11));
  hasher.Reset();
  hasher.Update(kText, 5);
  EXPECT_EQ(hasher.Digest(), first);
}

}  // namespace
}  // namespace kvault
