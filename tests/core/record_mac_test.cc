#include "core/record_mac.h"

#include <gtest/gtest.h>

#include <string>

namespace kvault {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s));
}

RecordMac Key(const std::string& k) { return *RecordMac::FromKey(k, "test"); }

TEST(RecordMacTest, SealedValuesOpenOnlyUnderTheSameKeyAndLabel) {
  const RecordMac mac = Key("a secret of 24 bytes....");
  std::string value = "page bytes";
  mac.Seal("label", &value);
  ASSERT_EQ(value.size(), 10 + kMacTagBytes);
  StatusOr<std::span<const std::byte>> opened = mac.Open("label", Bytes(value));
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(opened->data()),
                        opened->size()),
            "page bytes");
  EXPECT_EQ(mac.Open("other label", Bytes(value)).status().reason(),
            "checksum_mismatch");
  EXPECT_EQ(Key("another secret, 24 bytes").Open("label", Bytes(value))
                .status()
                .reason(),
            "checksum_mismatch");
  for (size_t i : {size_t{0}, size_t{9}, value.size() - 1}) {
    std::string changed = value;
    changed[i] ^= 0x20;
    EXPECT_EQ(mac.Open("label", Bytes(changed)).status().code(),
              StatusCode::kCorruption)
        << "byte " << i;
  }
  EXPECT_EQ(mac.Open("label", Bytes(value.substr(0, 31))).status().reason(),
            "truncated");
}

TEST(RecordMacTest, StreamedTagEqualsOneShot) {
  const RecordMac mac = Key("0123456789abcdef");
  const std::string data(100000, 'x');
  RecordMac::Stream s = mac.Begin("L");
  s.Update(Bytes(data.substr(0, 33333)));
  s.Update(Bytes(data.substr(33333)));
  const MacTag streamed = s.Final();
  EXPECT_EQ(streamed, mac.Tag("L", Bytes(data)));
  EXPECT_NE(streamed, mac.Tag("M", Bytes(data)));
  EXPECT_TRUE(RecordMac::SameTag(streamed, std::as_bytes(std::span(streamed))));
}

// The serve command reads the key from the file or variable its flags
// name (distributed_e2e_test covers --kv-store-key-file); FromKey checks it.
TEST(RecordMacTest, KeysMustBeLongEnoughAndLoseOneTrailingNewline) {
  StatusOr<RecordMac> short_key = RecordMac::FromKey("short", "--kv-store-key");
  EXPECT_EQ(short_key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_key.status().message().find("--kv-store-key"),
            std::string::npos);
  StatusOr<RecordMac> with_newline =
      RecordMac::FromKey("0123456789abcdef\n", "x");
  ASSERT_TRUE(with_newline.ok()) << with_newline.status();
  EXPECT_EQ(with_newline->Tag("L", Bytes("v")),
            Key("0123456789abcdef").Tag("L", Bytes("v")));
  EXPECT_EQ(RecordMac::TagMismatchError().reason(), "checksum_mismatch");
}

}  // namespace
}  // namespace kvault
