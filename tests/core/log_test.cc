#include "core/log.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace kvault {
namespace {

// Returns true when `s` starts with a timestamp like
// "2025-01-02T03:04:05.123456Z".
bool StartsWithTimestamp(std::string_view s) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (s.size() < kShape.size()) return false;
  for (size_t i = 0; i < kShape.size(); ++i) {
    const bool ok = kShape[i] == 'd'
                        ? std::isdigit(static_cast<unsigned char>(s[i])) != 0
                        : s[i] == kShape[i];
    if (!ok) return false;
  }
  return true;
}

// Returns the text after the "] " that ends the prefix ("" if none).
std::string Message(const std::string& line) {
  const size_t end = line.find("] ");
  return end == std::string::npos ? "" : line.substr(end + 2);
}

TEST(LogTest, DefaultMinimumLevelIsInfo) {
  EXPECT_EQ(MinLogLevel(), LogLevel::kInfo);
}

TEST(LogTest, LineHasTimestampLevelFileLineAndMessage) {
  ScopedLogCapture capture;
  const int line = __LINE__ + 1;
  KV_LOG(INFO) << "loaded " << 7 << " pages";
  ASSERT_EQ(capture.lines().size(), 1u);
  const std::string got = capture.lines()[0];
  EXPECT_TRUE(StartsWithTimestamp(got)) << got;
  constexpr size_t kTimestampBytes = 27;
  EXPECT_EQ(got.substr(kTimestampBytes),
            " INFO log_test.cc:" + std::to_string(line) + "] loaded 7 pages");
}

TEST(LogTest, EveryLevelHasItsName) {
  ScopedLogCapture capture(LogLevel::kDebug);
  KV_LOG(DEBUG) << "d";
  KV_LOG(INFO) << "i";
  KV_LOG(WARNING) << "w";
  KV_LOG(ERROR) << "e";
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find(" DEBUG "), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" INFO "), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(" WARNING "), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find(" ERROR "), std::string::npos) << lines[3];
  EXPECT_EQ(LogLevelName(LogLevel::kWarning), "WARNING");
}

int g_num_evaluations = 0;
int CountedValue() { return ++g_num_evaluations; }

TEST(LogTest, BelowMinimumLevelIsDroppedAndNotEvaluated) {
  ScopedLogCapture capture(LogLevel::kWarning);
  g_num_evaluations = 0;
  KV_LOG(DEBUG) << CountedValue();
  KV_LOG(INFO) << CountedValue();
  EXPECT_EQ(g_num_evaluations, 0);
  KV_LOG(WARNING) << CountedValue();
  KV_LOG(ERROR) << CountedValue();
  EXPECT_EQ(g_num_evaluations, 2);
  ASSERT_EQ(capture.lines().size(), 2u);
  EXPECT_NE(capture.lines()[0].find("] 1"), std::string::npos);
  EXPECT_NE(capture.lines()[1].find("] 2"), std::string::npos);
}

TEST(LogTest, CaptureRestoresPreviousLevel) {
  SetMinLogLevel(LogLevel::kError);
  {
    ScopedLogCapture capture(LogLevel::kDebug);
    EXPECT_EQ(MinLogLevel(), LogLevel::kDebug);
  }
  EXPECT_EQ(MinLogLevel(), LogLevel::kError);
  SetMinLogLevel(LogLevel::kInfo);
}

TEST(LogTest, NestedCapturesSeeOnlyTheirOwnLines) {
  ScopedLogCapture outer;
  KV_LOG(INFO) << "first";
  {
    ScopedLogCapture inner;
    KV_LOG(INFO) << "second";
    ASSERT_EQ(inner.lines().size(), 1u);
  }
  KV_LOG(INFO) << "third";
  ASSERT_EQ(outer.lines().size(), 2u);
  EXPECT_NE(outer.lines()[1].find("third"), std::string::npos);
}

TEST(LogTest, MacroIsSafeInUnbracedIfElse) {
  ScopedLogCapture capture;
  const bool flag = false;
  if (flag)
    KV_LOG(INFO) << "then";
  else
    KV_LOG(INFO) << "else";
  ASSERT_EQ(capture.lines().size(), 1u);
  EXPECT_NE(capture.lines()[0].find("] else"), std::string::npos);
}

TEST(LogTest, WithoutSinkLinesGoToStderr) {
  LogSink previous = SetLogSink(nullptr);
  ::testing::internal::CaptureStderr();
  KV_LOG(WARNING) << "to stderr";
  const std::string err = ::testing::internal::GetCapturedStderr();
  SetLogSink(std::move(previous));
  EXPECT_NE(err.find(" WARNING log_test.cc:"), std::string::npos) << err;
  EXPECT_TRUE(err.ends_with("] to stderr\n")) << err;
}

TEST(LogTest, SetLogSinkReturnsThePreviousSink) {
  std::vector<std::string> got;
  LogSink previous = SetLogSink(
      [&got](LogLevel, std::string_view line) { got.emplace_back(line); });
  KV_LOG(ERROR) << "x";
  LogSink mine = SetLogSink(std::move(previous));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(mine != nullptr);
  mine(LogLevel::kInfo, "direct");
  EXPECT_EQ(got.back(), "direct");
}

TEST(LogTest, ConcurrentLinesStayWhole) {
  ScopedLogCapture capture;
  constexpr int kNumThreads = 8;
  constexpr int kNumLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kNumThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kNumLines; ++i) {
        KV_LOG(INFO) << "thread " << t << " line " << i;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), size_t{kNumThreads * kNumLines});
  std::vector<int> next(kNumThreads, 0);  // per-thread order is kept
  for (const std::string& line : lines) {
    int t = -1;
    int i = -1;
    char extra = 0;
    ASSERT_TRUE(StartsWithTimestamp(line)) << line;
    ASSERT_EQ(std::sscanf(Message(line).c_str(), "thread %d line %d%c", &t, &i,
                          &extra),
              2)
        << line;
    ASSERT_TRUE(t >= 0 && t < kNumThreads) << line;
    ASSERT_EQ(i, next[t]++) << line;
  }
}

}  // namespace
}  // namespace kvault
