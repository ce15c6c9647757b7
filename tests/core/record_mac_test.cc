#include "core/record_mac.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

TEST(RecordMacTest, KeysComeFromFilesOrVariablesAndMustBeLongEnough) {
  EXPECT_EQ(RecordMac::FromKey("short", "x").status().code(),
            StatusCode::kInvalidArgument);
  const std::string path =
      (std::filesystem::temp_directory_path() / "kvault_record_mac_key")
          .string();
  std::ofstream(path) << "0123456789abcdef\n";
  StatusOr<RecordMac> from_file = RecordMac::FromFile(Env::Default(), path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  // The trailing newline is not part of the key.
  EXPECT_EQ(from_file->Tag("L", Bytes("v")),
            Key("0123456789abcdef").Tag("L", Bytes("v")));
  std::filesystem::remove(path);
  EXPECT_NE(RecordMac::FromFile(Env::Default(), path).status().message().find(
                path),
            std::string::npos);
  ::setenv("KVAULT_RECORD_MAC_TEST_KEY", "0123456789abcdef", 1);
  StatusOr<RecordMac> from_env = RecordMac::FromEnv("KVAULT_RECORD_MAC_TEST_KEY");
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  ::unsetenv("KVAULT_RECORD_MAC_TEST_KEY");
  EXPECT_FALSE(RecordMac::FromEnv("KVAULT_RECORD_MAC_TEST_KEY").ok());
}

}  // namespace
}  // namespace kvault
