// Env contract tests, run against both the POSIX Env (in a temp dir) and the
// in-memory FaultInjectingEnv so the fake cannot drift from the real thing.
#include "core/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"

namespace kvault {
namespace {

enum class EnvKind { kPosix, kFaultInjecting };

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string ToString(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

class EnvTest : public ::testing::TestWithParam<EnvKind> {
 protected:
  void SetUp() override {
    if (GetParam() == EnvKind::kPosix) {
      env_ = Env::Default();
      std::string pattern = ::testing::TempDir() + "kvault_env_test.XXXXXX";
      ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "errno " << errno;
      root_ = pattern;
    } else {
      fake_ = std::make_unique<FaultInjectingEnv>();
      env_ = fake_.get();
      root_ = "/env_test_root";
      ASSERT_TRUE(env_->CreateDir(root_).ok());
    }
  }

  void TearDown() override {
    if (GetParam() == EnvKind::kPosix && !root_.empty()) {
      std::filesystem::remove_all(root_);
    }
  }

  std::string Path(std::string_view name) const {
    return JoinPath(root_, name);
  }

  std::string Read(const std::string& path) {
    StatusOr<std::string> contents = ReadFileToString(env_, path);
    EXPECT_TRUE(contents.ok()) << contents.status();
    return contents.ok() ? *contents : "<error>";
  }

  void Write(const std::string& path, std::string_view data) {
    ASSERT_TRUE(WriteStringToFile(env_, data, path, /*sync=*/true).ok());
  }

  std::unique_ptr<FaultInjectingEnv> fake_;
  Env* env_ = nullptr;
  std::string root_;
};

TEST_P(EnvTest, WriteThenReadBack) {
  const std::string path = Path("f");
  auto file = env_->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("hello ").ok());
  const std::string binary("\0\x01\xff", 3);
  ASSERT_TRUE((*file)->Append(Bytes(binary)).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_TRUE(env_->FileExists(path));
  EXPECT_EQ(Read(path), "hello " + binary);
  StatusOr<uint64_t> size = env_->GetFileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 9u);
}

TEST_P(EnvTest, AppendsOfEverySizeArriveInOrder) {
  // Mixes appends smaller and larger than any write buffer.
  std::string expected;
  auto file = env_->NewWritableFile(Path("big"));
  ASSERT_TRUE(file.ok());
  for (size_t num_bytes : {1, 70000, 3, 65536, 0, 200000, 17}) {
    std::string chunk(num_bytes, '\0');
    for (size_t i = 0; i < num_bytes; ++i) {
      chunk[i] = static_cast<char>('a' + (expected.size() + i) % 23);
    }
    ASSERT_TRUE((*file)->Append(chunk).ok());
    expected += chunk;
  }
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(Read(Path("big")), expected);
}

TEST_P(EnvTest, NewWritableFileTruncates) {
  Write(Path("f"), "a long first version");
  Write(Path("f"), "v2");
  EXPECT_EQ(Read(Path("f")), "v2");
}

TEST_P(EnvTest, ClosedWritableFileRejectsCalls) {
  auto file = env_->NewWritableFile(Path("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ((*file)->Append("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*file)->Sync().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*file)->Close().code(), StatusCode::kFailedPrecondition);
}

TEST_P(EnvTest, SequentialReadAndSkip) {
  Write(Path("f"), "0123456789");
  auto file = env_->NewSequentialFile(Path("f"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::byte buf[3];
  StatusOr<size_t> n = (*file)->Read(buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(ToString(std::span(buf, *n)), "012");
  ASSERT_TRUE((*file)->Skip(2).ok());
  n = (*file)->Read(buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(ToString(std::span(buf, *n)), "567");
  ASSERT_TRUE((*file)->Skip(1).ok());
  n = (*file)->Read(buf);  // only "9" is left
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(ToString(std::span(buf, *n)), "9");
  ASSERT_TRUE((*file)->Skip(uint64_t{1} << 62).ok());
  n = (*file)->Read(buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_P(EnvTest, SkipPastEndStopsAtEnd) {
  Write(Path("f"), "abc");
  auto file = env_->NewSequentialFile(Path("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Skip(100).ok());
  std::byte buf[4];
  StatusOr<size_t> n = (*file)->Read(buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_P(EnvTest, RandomAccessReadAt) {
  Write(Path("f"), "0123456789");
  auto file = env_->NewRandomAccessFile(Path("f"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 10u);
  std::byte buf[4];
  StatusOr<size_t> n = (*file)->ReadAt(3, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(ToString(std::span(buf, *n)), "3456");
  n = (*file)->ReadAt(8, buf);  // short at the end
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(ToString(std::span(buf, *n)), "89");
  n = (*file)->ReadAt(10, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  n = (*file)->ReadAt(1000, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_P(EnvTest, GetChildrenListsSortedNames) {
  Write(Path("b"), "");
  Write(Path("a"), "");
  ASSERT_TRUE(env_->CreateDir(Path("c")).ok());
  Write(JoinPath(Path("c"), "nested"), "");  // not a child of root_
  StatusOr<std::vector<std::string>> names = env_->GetChildren(root_);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b", "c"}));
  names = env_->GetChildren(Path("c"));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"nested"});
}

TEST_P(EnvTest, GetChildrenErrors) {
  EXPECT_EQ(env_->GetChildren(Path("missing")).status().code(),
            StatusCode::kNotFound);
  Write(Path("file"), "x");
  EXPECT_EQ(env_->GetChildren(Path("file")).status().code(),
            StatusCode::kIOError);
}

TEST_P(EnvTest, RemoveFile) {
  Write(Path("f"), "x");
  ASSERT_TRUE(env_->RemoveFile(Path("f")).ok());
  EXPECT_FALSE(env_->FileExists(Path("f")));
  Status again = env_->RemoveFile(Path("f"));
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  EXPECT_NE(again.message().find(Path("f")), std::string_view::npos) << again;
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  EXPECT_EQ(env_->RemoveFile(Path("d")).code(), StatusCode::kIOError);
  EXPECT_TRUE(env_->FileExists(Path("d")));
}

TEST_P(EnvTest, RenameReplacesDestination) {
  Write(Path("src"), "new");
  Write(Path("dst"), "old");
  ASSERT_TRUE(env_->RenameFile(Path("src"), Path("dst")).ok());
  EXPECT_FALSE(env_->FileExists(Path("src")));
  EXPECT_EQ(Read(Path("dst")), "new");
  StatusOr<std::vector<std::string>> names = env_->GetChildren(root_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"dst"});
}

TEST_P(EnvTest, RenameIntoOtherDirectory) {
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  Write(Path("f"), "moved");
  ASSERT_TRUE(env_->RenameFile(Path("f"), Path("d/g")).ok());
  EXPECT_EQ(Read(Path("d/g")), "moved");
  EXPECT_FALSE(env_->FileExists(Path("f")));
}

TEST_P(EnvTest, RenameErrors) {
  EXPECT_EQ(env_->RenameFile(Path("missing"), Path("x")).code(),
            StatusCode::kNotFound);
  Write(Path("f"), "x");
  EXPECT_EQ(env_->RenameFile(Path("f"), Path("nodir/x")).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  EXPECT_EQ(env_->RenameFile(Path("f"), Path("d")).code(),
            StatusCode::kIOError);
  EXPECT_EQ(Read(Path("f")), "x");  // failed renames change nothing
}

TEST_P(EnvTest, CreateDir) {
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  EXPECT_TRUE(env_->CreateDir(Path("d")).ok()) << "existing dir is fine";
  EXPECT_TRUE(env_->FileExists(Path("d")));
  EXPECT_EQ(env_->CreateDir(Path("missing/d")).code(), StatusCode::kNotFound);
  Write(Path("f"), "x");
  EXPECT_EQ(env_->CreateDir(Path("f")).code(), StatusCode::kIOError);
}

TEST_P(EnvTest, OpenErrors) {
  EXPECT_EQ(env_->NewSequentialFile(Path("missing")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(env_->NewRandomAccessFile(Path("missing")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(env_->NewWritableFile(Path("nodir/f")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(env_->GetFileSize(Path("missing")).status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(env_->FileExists(Path("missing")));
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  EXPECT_EQ(env_->NewWritableFile(Path("d")).status().code(),
            StatusCode::kIOError);
  EXPECT_EQ(env_->NewSequentialFile(Path("d")).status().code(),
            StatusCode::kIOError);
  EXPECT_EQ(env_->NewRandomAccessFile(Path("d")).status().code(),
            StatusCode::kIOError);
  Write(Path("f"), "x");  // a file used as a directory: ENOTDIR
  EXPECT_EQ(env_->NewWritableFile(Path("f/g")).status().code(),
            StatusCode::kIOError);
  EXPECT_EQ(env_->NewSequentialFile(Path("f/g")).status().code(),
            StatusCode::kIOError);
}

TEST_P(EnvTest, ErrorsNameOperationPathAndReason) {
  Status s = env_->NewSequentialFile(Path("missing")).status();
  EXPECT_EQ(s.message(), "open for reading " + Path("missing") +
                             ": No such file or directory");
}

TEST_P(EnvTest, SyncDir) {
  EXPECT_TRUE(env_->SyncDir(root_).ok());
  EXPECT_EQ(env_->SyncDir(Path("missing")).code(), StatusCode::kNotFound);
}

TEST_P(EnvTest, OpenHandleSurvivesRemoval) {
  auto file = env_->NewWritableFile(Path("f"));
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(env_->RemoveFile(Path("f")).ok());
  EXPECT_TRUE((*file)->Append("still writable").ok());
  EXPECT_TRUE((*file)->Sync().ok());
  EXPECT_TRUE((*file)->Close().ok());
  EXPECT_FALSE(env_->FileExists(Path("f")));
}

TEST_P(EnvTest, NowMicrosNeverGoesBack) {
  const uint64_t first = env_->NowMicros();
  EXPECT_GE(env_->NowMicros(), first);
}

INSTANTIATE_TEST_SUITE_P(BothEnvs, EnvTest,
                         ::testing::Values(EnvKind::kPosix,
                                           EnvKind::kFaultInjecting),
                         [](const ::testing::TestParamInfo<EnvKind>& info) {
                           return info.param == EnvKind::kPosix
                                      ? "Posix"
                                      : "FaultInjecting";
                         });

TEST(PosixEnvTest, DefaultIsASingleton) {
  EXPECT_NE(Env::Default(), nullptr);
  EXPECT_EQ(Env::Default(), Env::Default());
}

TEST(PosixEnvTest, FullDiskIsResourceExhausted) {
  struct stat st;
  if (::stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full";
  auto file = Env::Default()->NewWritableFile("/dev/full");
  ASSERT_TRUE(file.ok()) << file.status();
  (void)(*file)->Append("bytes that cannot land");  // may only be buffered
  Status s = (*file)->Sync();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("/dev/full"), std::string_view::npos) << s;
}

// A unique empty directory under /tmp for one test.
std::string MakeTempDir(const char* name) {
  std::string templ = std::string("/tmp/kvault_env_") + name + "_XXXXXX";
  const char* made = ::mkdtemp(templ.data());
  return made != nullptr ? std::string(made) : std::string();
}

// Regression (issue 17): opening a FIFO blocked in open() until a writer
// came, freezing the engine. It must fail at once, precisely.
TEST(PosixEnvTest, ReadingAFifoFailsAtOnceWithNotRegularFile) {
  const std::string dir = MakeTempDir("fifo");
  ASSERT_FALSE(dir.empty());
  const std::string fifo = dir + "/fifo.bin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto opened = std::async(std::launch::async, [&] {
    return Env::Default()->NewRandomAccessFile(fifo).status();
  });
  if (opened.wait_for(std::chrono::seconds(10)) !=
      std::future_status::ready) {
    // Unblock the stuck open (a writer arrives) so the test can end.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    opened.wait();
    if (fd >= 0) ::close(fd);
    FAIL() << "opening a FIFO for reading blocked";
  }
  const Status s = opened.get();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.reason(), kReasonNotRegularFile) << s;
  EXPECT_EQ(s.message(), "open for reading " + fifo +
                             ": a FIFO, not a regular file");
  EXPECT_EQ(Env::Default()->NewSequentialFile(fifo).status().reason(),
            kReasonNotRegularFile);
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST(PosixEnvTest, ReadingASymlinkIsRefused) {
  const std::string dir = MakeTempDir("link");
  ASSERT_FALSE(dir.empty());
  const std::string target = dir + "/real.bin";
  const std::string link = dir + "/link.bin";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), "abc", target, false).ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  const Status s = Env::Default()->NewRandomAccessFile(link).status();
  EXPECT_EQ(s.reason(), kReasonNotRegularFile) << s;
  EXPECT_NE(s.message().find("a symbolic link"), std::string_view::npos) << s;
  EXPECT_TRUE(Env::Default()->NewRandomAccessFile(target).ok());
  ::unlink(link.c_str());
  ::unlink(target.c_str());
  ::rmdir(dir.c_str());
}

TEST(ErrnoErrorTest, FullDiskHasReasonDiskFull) {
  EXPECT_EQ(ErrnoError("write", "/x", ENOSPC).reason(), kReasonDiskFull);
  EXPECT_EQ(ErrnoError("write", "/x", EDQUOT).reason(), kReasonDiskFull);
  EXPECT_EQ(ErrnoError("write", "/x", EIO).reason(), "");
}

TEST(ErrnoErrorTest, MapsCodes) {
  EXPECT_EQ(ErrnoError("open", "/x", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError("write", "/x", ENOSPC).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoError("write", "/x", EDQUOT).code(),
            StatusCode::kResourceExhausted);
  const Status eio = ErrnoError("write", "/x", EIO);
  EXPECT_EQ(eio.code(), StatusCode::kIOError);
  EXPECT_EQ(eio.message(), "write /x: Input/output error");
}

TEST(PathTest, DirNameAndJoinPath) {
  EXPECT_EQ(DirName("/a/b/c"), "/a/b");
  EXPECT_EQ(DirName("/a"), "/");
  EXPECT_EQ(DirName("a/b"), "a");
  EXPECT_EQ(DirName("a"), ".");
  EXPECT_EQ(JoinPath("/a", "b"), "/a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
}

}  // namespace
}  // namespace kvault
