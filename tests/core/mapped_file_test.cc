// MappedFile in both load modes: the same bytes, huge-page alignment for
// kRead, a private copy that later writes to the file do not change, and
// precise errors for missing files and directories.
#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>

namespace kvault {
namespace {

constexpr LoadMode kModes[] = {LoadMode::kMmap, LoadMode::kRead};

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/kvault_mapped_" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good()) << path;
  return path;
}

std::string RandomBytes(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string BytesOf(const MappedFile& f) {
  return std::string(reinterpret_cast<const char*>(f.bytes().data()),
                     f.bytes().size());
}

TEST(MappedFileTest, BothModesSeeTheSameBytes) {
  // Past one 2 MiB huge page and not a multiple of 4 KiB.
  const std::string bytes = RandomBytes((size_t{3} << 20) + 17);
  const std::string path = WriteFile("same", bytes);
  for (LoadMode mode : kModes) {
    auto f = MappedFile::Open(path, mode);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->size(), bytes.size());
    EXPECT_TRUE(BytesOf(**f) == bytes) << static_cast<int>(mode);
    EXPECT_EQ((*f)->path(), path);
  }
  std::remove(path.c_str());
}

TEST(MappedFileTest, ReadModeStartsOnAHugePageBoundary) {
  const std::string path = WriteFile("aligned", RandomBytes(100000));
  auto f = MappedFile::Open(path, LoadMode::kRead);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto addr = reinterpret_cast<uintptr_t>((*f)->bytes().data());
  EXPECT_EQ(addr % (uintptr_t{2} << 20), 0u);
  std::remove(path.c_str());
}

TEST(MappedFileTest, ReadModeKeepsItsCopyWhenTheFileChanges) {
  const std::string before = RandomBytes(8192);
  const std::string path = WriteFile("copy", before);
  auto f = MappedFile::Open(path, LoadMode::kRead);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  {
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.write("changed", 7);
  }
  EXPECT_TRUE(BytesOf(**f) == before);
  std::remove(path.c_str());
}

TEST(MappedFileTest, EmptyFileGivesEmptyBytesInBothModes) {
  const std::string path = WriteFile("empty", "");
  for (LoadMode mode : kModes) {
    auto f = MappedFile::Open(path, mode);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->size(), 0u);
    EXPECT_TRUE((*f)->bytes().empty());
  }
  std::remove(path.c_str());
}

TEST(MappedFileTest, MissingFileAndDirectoryErrorsNameThePath) {
  const std::string missing = ::testing::TempDir() + "/kvault_no_such_file";
  for (LoadMode mode : kModes) {
    auto f = MappedFile::Open(missing, mode);
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(f.status().IsNotFound()) << f.status().ToString();
    EXPECT_NE(f.status().message().find(missing), std::string::npos);
    auto dir = MappedFile::Open(::testing::TempDir(), mode);
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument)
        << dir.status().ToString();
  }
}

}  // namespace
}  // namespace kvault
