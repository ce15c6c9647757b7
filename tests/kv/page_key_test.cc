#include "kv/page_key.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/checksum.h"

namespace kvault {
namespace {

KvLayout Layout() {
  KvLayout l;
  l.num_layers = 4;
  l.num_kv_heads = 2;
  l.head_dim_k = 8;
  l.head_dim_v = 8;
  l.dtype = KvDtype::kF16;
  return l;
}

std::vector<TokenPos> Cells(size_t n, TokenId salt = 0) {
  std::vector<TokenPos> cells;
  for (size_t i = 0; i < n; ++i) {
    cells.push_back({static_cast<TokenId>(100 + salt + i * 3),
                     static_cast<Pos>(i)});
  }
  return cells;
}

// The documented byte layout of a page key, built independently.
TEST(PageKeyTest, NextPageKeyHashesParentThenCellsLittleEndian) {
  const PageKey parent{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const std::vector<TokenPos> cells = {{7, 0}, {-1, 1}};
  unsigned char bytes[16 + 16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(parent.lo >> (8 * i));
    bytes[8 + i] = static_cast<unsigned char>(parent.hi >> (8 * i));
  }
  const uint32_t words[4] = {7, 0, 0xFFFFFFFFu, 1};
  for (int w = 0; w < 4; ++w) {
    for (int i = 0; i < 4; ++i) {
      bytes[16 + 4 * w + i] = static_cast<unsigned char>(words[w] >> (8 * i));
    }
  }
  const Hash128 h = Xxh3_128(bytes, sizeof(bytes));
  EXPECT_EQ(NextPageKey(parent, cells), (PageKey{h.lo, h.hi}));
}

TEST(PageKeyTest, RootDependsOnEverythingThatShapesTheKv) {
  const ModelFingerprint fp{1, 2};
  std::set<PageKey> roots;
  roots.insert(ChainRoot(fp, Layout(), 16, 0));
  roots.insert(ChainRoot(ModelFingerprint{1, 3}, Layout(), 16, 0));
  roots.insert(ChainRoot(ModelFingerprint{2, 2}, Layout(), 16, 0));
  for (int field = 0; field < 5; ++field) {
    KvLayout l = Layout();
    if (field == 0) l.num_layers = 5;
    if (field == 1) l.num_kv_heads = 4;
    if (field == 2) l.head_dim_k = 16;
    if (field == 3) l.head_dim_v = 16;
    if (field == 4) l.dtype = KvDtype::kF32;
    roots.insert(ChainRoot(fp, l, 16, 0));
  }
  roots.insert(ChainRoot(fp, Layout(), 32, 0));
  roots.insert(ChainRoot(fp, Layout(), 16, 1));
  EXPECT_EQ(roots.size(), 10u);
  EXPECT_EQ(ChainRoot(fp, Layout(), 16, 0), ChainRoot(fp, Layout(), 16, 0));
}

// A page's key covers everything before it: a change in page 1 leaves page
// 0's key and changes every later one; a partly filled page has no key.
TEST(PageKeyTest, ChainKeysDependOnTheWholePrefix) {
  const PageKey root = ChainRoot(ModelFingerprint{1, 2}, Layout(), 4, 0);
  std::vector<TokenPos> cells = Cells(14);
  const std::vector<PageKey> keys = PageKeyChain(root, cells, 4);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], NextPageKey(root, std::span(cells).first(4)));
  EXPECT_EQ(keys[1], NextPageKey(keys[0], std::span(cells).subspan(4, 4)));
  EXPECT_EQ(std::set<PageKey>(keys.begin(), keys.end()).size(), 3u);

  std::vector<TokenPos> edited = cells;
  edited[5].token += 1;
  const std::vector<PageKey> k2 = PageKeyChain(root, edited, 4);
  EXPECT_EQ(k2[0], keys[0]);
  EXPECT_NE(k2[1], keys[1]);
  EXPECT_NE(k2[2], keys[2]);

  std::vector<TokenPos> shifted = cells;
  shifted[0].pos = 1;  // same tokens at other positions: other K/V
  EXPECT_NE(PageKeyChain(root, shifted, 4)[0], keys[0]);

  // Same tokens after a different first page: page 1's key differs although
  // its own cells are equal.
  std::vector<TokenPos> other_start = cells;
  other_start[0].token = 1;
  EXPECT_NE(PageKeyChain(root, other_start, 4)[1], keys[1]);
  EXPECT_TRUE(PageKeyChain(root, Cells(3), 4).empty());
  EXPECT_TRUE(PageKeyChain(root, cells, 0).empty());
}

TEST(PageKeyTest, HexRoundTripsAndRejectsOtherText) {
  const PageKey key{0x00000000000000ffull, 0xabcdef0123456789ull};
  EXPECT_EQ(key.ToHex(), "abcdef012345678900000000000000ff");
  EXPECT_EQ(PageKey::FromHex(key.ToHex()), key);
  EXPECT_FALSE(PageKey::FromHex("abc").has_value());
  EXPECT_FALSE(PageKey::FromHex("ABCDEF012345678900000000000000ff"));
  EXPECT_FALSE(PageKey::FromHex("abcdef01234567890000000000000g0f"));
}

}  // namespace
}  // namespace kvault
