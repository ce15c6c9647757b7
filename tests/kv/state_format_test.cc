#include "kv/state_format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <string>

#include "core/checksum.h"
#include "kv/state_file.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::kTestFingerprint;

StateHeader SampleHeader() {
  StateHeader h;
  h.producer = "kvault test 1.2.3";
  h.fingerprint = {0x1111222233334444ULL, 0x5555666677778888ULL};
  h.layout = KvLayout{3, 4, 64, 32, KvDtype::kQ8_0};
  h.tokens_per_chunk = 7;
  h.num_tokens = 20;
  return h;
}

using HeaderBytes = std::array<std::byte, kStateHeaderBytes>;

void Put32(HeaderBytes& b, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[offset + i] = std::byte(v >> (8 * i));
}
void Put64(HeaderBytes& b, size_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[offset + i] = std::byte(v >> (8 * i));
}
uint64_t Get64(std::span<const std::byte> b, size_t offset) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(b[offset + i]) << (8 * i);
  return v;
}
// Recomputes the header checksum after a test edited the header, so the
// edit reaches the checks after check 3.
void Reseal(HeaderBytes& b) { Put64(b, 120, Xxh3_64(b.data(), 120)); }

TEST(StateFormatTest, HeaderRoundTripsAndMatchesTheSpecLayout) {
  const StateHeader h = SampleHeader();
  HeaderBytes b = EncodeHeader(h);
  EXPECT_EQ(std::memcmp(b.data(), "KVAULTKV", 8), 0);
  EXPECT_EQ(Get64(b, 8) & 0xffffffff, 1u);  // format_version
  EXPECT_EQ(Get64(b, 8) >> 32, 128u);       // header_bytes
  EXPECT_EQ(std::memcmp(b.data() + 16, "kvault test 1.2.3", 17), 0);
  EXPECT_EQ(b[16 + 17], std::byte{0});  // NUL padding
  EXPECT_EQ(Get64(b, 48), h.fingerprint.lo);
  EXPECT_EQ(Get64(b, 56), h.fingerprint.hi);
  EXPECT_EQ(Get64(b, 64), 3u | (uint64_t{4} << 32));    // layers, heads
  EXPECT_EQ(Get64(b, 72), 64u | (uint64_t{32} << 32));  // head dims
  EXPECT_EQ(Get64(b, 80), 8u | (uint64_t{7} << 32));    // q8_0, tpc
  EXPECT_EQ(Get64(b, 88), 20u);
  for (size_t i = 96; i < 120; ++i) EXPECT_EQ(b[i], std::byte{0}) << i;
  EXPECT_EQ(Get64(b, 120), Xxh3_64(b.data(), 120));

  StatusOr<StateHeader> got = DecodeHeader(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->format_version, 1u);
  EXPECT_EQ(got->producer, h.producer);
  EXPECT_EQ(got->fingerprint, h.fingerprint);
  EXPECT_EQ(got->layout, h.layout);
  EXPECT_EQ(got->tokens_per_chunk, h.tokens_per_chunk);
  EXPECT_EQ(got->num_tokens, h.num_tokens);
}

TEST(StateFormatTest, ShortHeaderIsTruncated) {
  HeaderBytes b = EncodeHeader(SampleHeader());
  Status s = DecodeHeader(std::span(b).first(100)).status();
  EXPECT_TRUE(s.IsCorruption()) << s;
  EXPECT_EQ(s.reason(), kReasonTruncated);
}

TEST(StateFormatTest, Check2BadMagic) {
  HeaderBytes b = EncodeHeader(SampleHeader());
  b[3] = std::byte{'X'};
  Reseal(b);
  Status s = DecodeHeader(b).status();
  EXPECT_TRUE(s.IsCorruption()) << s;
  EXPECT_EQ(s.reason(), kReasonBadMagic);
  EXPECT_NE(s.message().find("not a kvault state file"), std::string::npos);
  EXPECT_NE(s.message().find("KVAXLTKV"), std::string::npos) << s;
}

TEST(StateFormatTest, Check3HeaderChecksumCoversEveryByteBefore120) {
  for (size_t offset : {8u, 12u, 20u, 64u, 84u, 100u, 119u, 120u, 127u}) {
    HeaderBytes b = EncodeHeader(SampleHeader());
    b[offset] ^= std::byte{0x04};
    Status s = DecodeHeader(b).status();
    EXPECT_TRUE(s.IsCorruption()) << offset << ": " << s;
    EXPECT_EQ(s.reason(), kReasonChecksumMismatch) << offset;
    EXPECT_NE(s.message().find("offset 120"), std::string::npos) << s;
    EXPECT_NE(s.message().find("stored 0x"), std::string::npos) << s;
  }
}

TEST(StateFormatTest, Check4NewerVersionIsUnimplemented) {
  HeaderBytes b = EncodeHeader(SampleHeader());
  Put32(b, 8, 2);
  Put32(b, 12, 256);  // a newer header may be larger: still "version 2"
  Reseal(b);
  Status s = DecodeHeader(b).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s;
  EXPECT_EQ(s.reason(), kReasonVersionUnsupported);
  EXPECT_EQ(s.message(),
            "state file version 2 not supported; this build reads version 1");
}

struct BadField {
  const char* name;
  size_t offset;
  uint32_t value;
};

TEST(StateFormatTest, Check5EachFieldOutOfRangeIsBadHeader) {
  const BadField cases[] = {
      {"header_bytes", 12, 256},
      {"num_layers", 64, 0},
      {"num_layers", 64, 1025},
      {"num_kv_heads", 68, 0},
      {"num_kv_heads", 68, 1025},
      {"head_dim_k", 72, 0},
      {"head_dim_k", 72, 16385},
      {"head_dim_v", 76, 16385},
      {"dtype", 80, 2},
      {"dtype", 80, 0x101},
      {"tokens_per_chunk", 84, 0},
      {"tokens_per_chunk", 84, (1u << 20) + 1},
      {"num_tokens", 88, 0},  // low word 0, high word set below
  };
  for (const BadField& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + std::to_string(c.value));
    HeaderBytes b = EncodeHeader(SampleHeader());
    Put32(b, c.offset, c.value);
    if (c.offset == 88) Put64(b, 88, uint64_t{1} << 31);  // 2^31 tokens
    Reseal(b);
    Status s = DecodeHeader(b).status();
    EXPECT_TRUE(s.IsCorruption()) << s;
    EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
    EXPECT_NE(s.message().find(c.name), std::string::npos) << s;
    EXPECT_NE(s.message().find(std::to_string(c.offset)), std::string::npos)
        << s;
  }
}

TEST(StateFormatTest, Check5ReservedPaddingAndRowShape) {
  {
    HeaderBytes b = EncodeHeader(SampleHeader());
    b[110] = std::byte{1};
    Reseal(b);
    Status s = DecodeHeader(b).status();
    EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
    EXPECT_NE(s.message().find("reserved byte at offset 110"),
              std::string::npos)
        << s;
  }
  {
    HeaderBytes b = EncodeHeader(SampleHeader());
    b[47] = std::byte{'x'};  // a byte after the producer's NUL padding began
    Reseal(b);
    EXPECT_EQ(DecodeHeader(b).status().reason(), kReasonBadHeader);
  }
  {
    HeaderBytes b = EncodeHeader(SampleHeader());  // q8_0, 4 heads
    Put32(b, 76, 4);  // V row of 16 values: not whole 32-value blocks
    Reseal(b);
    Status s = DecodeHeader(b).status();
    EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
    EXPECT_NE(s.message().find("multiples of 32"), std::string::npos) << s;
  }
  {
    // Each field in range, but 1024 heads x 1025 values is over the 2^20
    // values a row may hold (what KvLayout::Validate enforces).
    StateHeader h = SampleHeader();
    h.layout = KvLayout{1, 1024, 1025, 64, KvDtype::kF16};
    Status s = ValidateHeaderFields(h);
    EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
    EXPECT_NE(s.message().find("2^20"), std::string::npos) << s;
  }
}

TEST(StateFormatTest, Check5RefusesFilesAbove2To62Bytes) {
  StateHeader h = SampleHeader();
  h.layout = KvLayout{1024, 64, 16384, 16384, KvDtype::kF32};  // 2^20 rows
  h.num_tokens = kStateMaxTokens;
  Status s = ValidateHeaderFields(h);
  EXPECT_EQ(s.reason(), kReasonBadHeader) << s;
  EXPECT_NE(s.message().find("2^62"), std::string::npos) << s;
  h.num_tokens = 1;  // 2^37-byte cells are fine for a short sequence
  EXPECT_TRUE(ValidateHeaderFields(h).ok());
}

TEST(StateFormatTest, ChecksRunInTheSpecOrder) {
  // A flipped version bit is corruption (3 before 4), not a newer version.
  HeaderBytes b = EncodeHeader(SampleHeader());
  b[8] ^= std::byte{0x02};
  EXPECT_EQ(DecodeHeader(b).status().reason(), kReasonChecksumMismatch);
  // Bad magic wins over a wrong checksum (2 before 3).
  b[0] = std::byte{'k'};
  EXPECT_EQ(DecodeHeader(b).status().reason(), kReasonBadMagic);
}

TEST(StateFormatTest, Checks8To10NameBothValues) {
  const StateHeader h = SampleHeader();
  Status s = CheckCompatible(h, h.layout, {h.fingerprint.lo, 7});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.reason(), kReasonModelMismatch);
  EXPECT_EQ(s.message(),
            "model fingerprint: file has 55556666777788881111222233334444, "
            "loaded model has 00000000000000071111222233334444");

  KvLayout other = h.layout;
  other.num_kv_heads = 8;
  s = CheckCompatible(h, other, h.fingerprint);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.reason(), kReasonLayoutMismatch);
  EXPECT_NE(s.message().find("file has 3 layers x 4 KV heads"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("cache has 3 layers x 8 KV heads"),
            std::string::npos)
      << s;

  other = h.layout;
  other.dtype = KvDtype::kF16;
  s = CheckCompatible(h, other, h.fingerprint);
  EXPECT_EQ(s.reason(), kReasonDtypeMismatch);
  EXPECT_EQ(s.message(), "element type: file has q8_0, cache has f16");
  EXPECT_TRUE(CheckCompatible(h, h.layout, h.fingerprint).ok());
}

TEST(StateFormatTest, TrailerRoundTripAndCheck7) {
  const auto t = EncodeTrailer({1000, 0xabcdef});
  EXPECT_EQ(std::memcmp(t.data() + 16, "KVAULTND", 8), 0);
  StatusOr<StateTrailer> got = DecodeTrailer(t, 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->summary_checksum, 0xabcdefu);

  Status s = DecodeTrailer(t, 1008).status();
  EXPECT_EQ(s.reason(), kReasonBadTrailer) << s;
  EXPECT_NE(s.message().find("1000"), std::string::npos) << s;
  EXPECT_NE(s.message().find("1008"), std::string::npos) << s;
  auto bad = t;
  bad[23] = std::byte{'X'};
  s = DecodeTrailer(bad, 1000).status();
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.reason(), kReasonBadTrailer);
  EXPECT_NE(s.message().find("offset 976"), std::string::npos) << s;
}

// The spec's definition: XXH3-64, seed 0, over the little-endian u64s.
TEST(StateFormatTest, SummaryChecksumHashesTheChecksumsInFileOrder) {
  const uint64_t chunks[] = {0x0102030405060708u, 7u};
  unsigned char le[4 * 8];
  const uint64_t all[] = {0xaau, 0xbbu, chunks[0], chunks[1]};
  for (int i = 0; i < 4; ++i) {
    for (int b = 0; b < 8; ++b) le[8 * i + b] = (all[i] >> (8 * b)) & 0xff;
  }
  EXPECT_EQ(SummaryChecksum(0xaa, 0xbb, chunks), XXH3_64bits(le, sizeof(le)));
  EXPECT_EQ(SummaryChecksum(0xaa, 0xbb, {}), XXH3_64bits(le, 16));
  EXPECT_NE(SummaryChecksum(0xbb, 0xaa, chunks),
            SummaryChecksum(0xaa, 0xbb, chunks));
}

TEST(StateFormatTest, ChooseTokensPerChunkBounds) {
  const KvLayout layout = state_test::SmallLayout();  // 512 bytes per cell
  ASSERT_EQ(layout.cell_bytes(), 512u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, uint64_t{1} << 20), 2048u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, 1600), 3u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, 1023), 1u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, 100), 1u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, 0), 1u);
  EXPECT_EQ(ChooseTokensPerChunk(layout, uint64_t{1} << 40),
            kStateMaxTokensPerChunk);
}

TEST(StateFormatTest, ChunkGeometryAndFileBytesFormula) {
  StateHeader h = SampleHeader();  // 20 tokens, 7 per chunk
  const uint64_t cell = h.layout.cell_bytes();
  ASSERT_EQ(cell, 3u * (4 * 64 / 32 * 34 + 4 * 32 / 32 * 34));
  EXPECT_EQ(h.num_chunks(), 3u);
  EXPECT_EQ(h.chunk_tokens(0), 7u);
  EXPECT_EQ(h.chunk_tokens(2), 6u);
  EXPECT_EQ(h.chunk_offset(0), 128u + 160 + 8);
  EXPECT_EQ(h.chunk_offset(2), 128u + 160 + 8 + 2 * (7 * cell + 8));
  EXPECT_EQ(h.file_bytes(), 128 + 8 * 20 + 8 + 20 * cell + 8 * 3 + 24);
  h.num_tokens = 0;
  EXPECT_EQ(h.num_chunks(), 0u);
  EXPECT_EQ(h.file_bytes(), 128u + 8 + 24);
}

TEST(StateFormatTest, WrittenFilesHaveExactlyFileBytes) {
  auto cache = state_test::MakeCache(state_test::SmallLayout(), 64, 4);
  SaveOptions options;
  options.target_chunk_bytes = 512 * 5;  // 5 tokens per chunk
  for (uint64_t n : {0, 1, 4, 5, 6, 10, 11, 37}) {
    SCOPED_TRACE(n);
    cache->Clear();
    state_test::AppendRandom(cache.get(), SeqId(1), n, n);
    const std::string file =
        state_test::SaveToString(*cache, SeqId(1), options);
    StatusOr<StateHeader> h = ReadStateHeader(*state_test::StringFile(file));
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->tokens_per_chunk, 5u);
    EXPECT_EQ(h->num_tokens, n);
    EXPECT_EQ(file.size(), 128 + 8 * n + 8 + n * 512 + 8 * ((n + 4) / 5) + 24);
  }
}

void AppendLe(std::string& out, uint64_t v, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) out += static_cast<char>(v >> (8 * i));
}

// Builds the file the spec prescribes for `seq`, cell by cell, with xxHash
// called directly: an independent reference for the writer.
std::string SpecFile(const KvCache& cache, SeqId seq, uint32_t tpc) {
  const SequenceTable& table = cache.table();
  const KvStorage& storage = *cache.storage();
  StateHeader h;
  h.fingerprint = kTestFingerprint;
  h.layout = storage.layout();
  h.tokens_per_chunk = tpc;
  h.num_tokens = table.Length(seq);
  const auto header = EncodeHeader(h);
  std::string out(reinterpret_cast<const char*>(header.data()), 128);
  std::string sums;
  AppendLe(sums, Get64(header, 120), 8);
  std::string records;
  for (const TokenPos& t : table.Cells(seq)) {
    AppendLe(records, static_cast<uint32_t>(t.token), 4);
    AppendLe(records, static_cast<uint32_t>(t.pos), 4);
  }
  out += records;
  AppendLe(out, XXH3_64bits(records.data(), records.size()), 8);
  AppendLe(sums, XXH3_64bits(records.data(), records.size()), 8);
  for (uint64_t c = 0; c * tpc < h.num_tokens; ++c) {
    std::string payload;
    const uint64_t end = std::min<uint64_t>(h.num_tokens, (c + 1) * tpc);
    for (uint32_t l = 0; l < h.layout.num_layers; ++l) {
      for (int side = 0; side < 2; ++side) {
        for (uint64_t i = c * tpc; i < end; ++i) {
          const CellId cell = table.CellAt(seq, i);
          auto row = side == 0 ? storage.Rows(KvSide::kK, l, cell)
                               : storage.Rows(KvSide::kV, l, cell);
          payload.append(reinterpret_cast<const char*>(row.data()), row.size());
        }
      }
    }
    const uint64_t sum =
        XXH3_64bits_withSeed(payload.data(), payload.size(), c + 1);
    out += payload;
    AppendLe(out, sum, 8);
    AppendLe(sums, sum, 8);
  }
  AppendLe(out, out.size() + 24, 8);
  AppendLe(out, XXH3_64bits(sums.data(), sums.size()), 8);
  return out + "KVAULTND";
}

TEST(StateFormatTest, WrittenFileMatchesTheSpecByteForByte) {
  for (uint32_t page_size : {1u, 4u}) {
    SCOPED_TRACE(page_size);
    auto cache =
        state_test::MakeCache(state_test::SmallLayout(), 64, page_size);
    for (int r = 0; r < 5; ++r) {  // interleave so pages are not consecutive
      state_test::AppendRandom(cache.get(), SeqId(1), 3, r);
      state_test::AppendRandom(cache.get(), SeqId(2), 2, 10 + r);
    }
    SaveOptions options;
    options.producer = "";
    options.target_chunk_bytes = 4 * 512 + 100;  // 4 tokens per chunk
    EXPECT_TRUE(state_test::SaveToString(*cache, SeqId(1), options) ==
                SpecFile(*cache, SeqId(1), 4));
  }
}

class StateFileChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = state_test::MakeCache(state_test::SmallLayout(), 16, 4);
    state_test::AppendRandom(cache_.get(), SeqId(1), 9, 42);
    file_ = state_test::SaveToString(*cache_, SeqId(1));
  }
  Status Read(const std::string& bytes) {
    return ReadStateHeader(*state_test::StringFile(bytes)).status();
  }

  std::unique_ptr<KvCache> cache_;
  std::string file_;
};

TEST_F(StateFileChecksTest, Check1FileShorterThanAHeader) {
  Status s = Read(file_.substr(0, 127));
  EXPECT_TRUE(s.IsCorruption()) << s;
  EXPECT_EQ(s.reason(), kReasonTruncated);
  EXPECT_NE(s.message().find("127"), std::string::npos) << s;
  EXPECT_EQ(Read("").reason(), kReasonTruncated);
}

TEST_F(StateFileChecksTest, Check6LengthShorterOrLonger) {
  const std::string size = std::to_string(file_.size());
  Status s = Read(file_.substr(0, file_.size() - 1));
  EXPECT_EQ(s.reason(), kReasonTruncated) << s;
  EXPECT_EQ(s.message(), "file is " + std::to_string(file_.size() - 1) +
                             " bytes, header implies " + size);
  s = Read(file_ + "x");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.reason(), kReasonTrailingBytes) << s;
  EXPECT_NE(s.message().find(size), std::string::npos) << s;
}

TEST_F(StateFileChecksTest, Check7TrailerMagicAndLength) {
  std::string bad = file_;
  bad[bad.size() - 1] ^= 1;
  EXPECT_EQ(Read(bad).reason(), kReasonBadTrailer);
  bad = file_;
  bad[bad.size() - 24] ^= 1;  // trailer file_bytes
  Status s = Read(bad);
  EXPECT_EQ(s.reason(), kReasonBadTrailer) << s;
  EXPECT_TRUE(Read(file_).ok());
}

TEST_F(StateFileChecksTest, Checks8To10ComeBeforeAnyRoom) {
  // Mismatches are reported by restore without touching the cache.
  auto other =
      state_test::MakeCache(state_test::SmallLayout(KvDtype::kF32), 16, 4);
  StatusOr<RestoreResult> r = RestoreSequence(
      *state_test::StringFile(file_), kTestFingerprint, SeqId(2), other.get());
  EXPECT_EQ(r.status().reason(), kReasonDtypeMismatch) << r.status();
  EXPECT_EQ(other->table().SequenceIds().size(), 0u);
}

TEST(StateFormatTest, TokenRecordsAreLittleEndianI32Pairs) {
  const TokenPos tokens[] = {{1, 2}, {-1, 0x01020304}};
  std::array<std::byte, 16> b;
  EncodeTokenRecords(tokens, b);
  EXPECT_EQ(Get64(b, 0), 1u | (uint64_t{2} << 32));
  EXPECT_EQ(Get64(b, 8), 0xffffffffu | (uint64_t{0x01020304} << 32));
  TokenPos back[2];
  DecodeTokenRecords(b, back);
  EXPECT_EQ(back[0], tokens[0]);
  EXPECT_EQ(back[1], tokens[1]);
}

}  // namespace
}  // namespace kvault
