#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <utility>

namespace kvault {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

// The sink, and the lock that guards it and serialises writes so lines
// never interleave. A function static (never destroyed) so that logging
// from other static initialisers and destructors is safe.
struct SinkState {
  Mutex mu;
  LogSink sink GUARDED_BY(mu);
};
SinkState& Sinks() {
  static SinkState* const state = new SinkState();
  return *state;
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Returns e.g. "2025-01-02T03:04:05.123456Z".
std::string UtcTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          now.time_since_epoch())
                          .count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char buf[96];  // Roomy enough for any int fields, which silences GCC.
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, static_cast<int>(micros % 1000000));
  return buf;
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

void SetMinLogLevel(LogLevel level) {
  g_min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel MinLogLevel() {
  return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed));
}

LogSink SetLogSink(LogSink sink) {
  SinkState& state = Sinks();
  MutexLock lock(&state.mu);
  return std::exchange(state.sink, std::move(sink));
}

ScopedLogCapture::ScopedLogCapture(LogLevel min_level)
    : previous_level_(MinLogLevel()) {
  previous_sink_ = SetLogSink([this](LogLevel, std::string_view line) {
    MutexLock lock(&mu_);
    lines_.emplace_back(line);
  });
  SetMinLogLevel(min_level);
}

ScopedLogCapture::~ScopedLogCapture() {
  SetMinLogLevel(previous_level_);
  SetLogSink(std::move(previous_sink_));
}

std::vector<std::string> ScopedLogCapture::lines() const {
  MutexLock lock(&mu_);
  return lines_;
}

namespace internal {

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_min_level.load(std::memory_order_relaxed);
}

LogMessage::LogMessage(const char* file, int line, LogLevel level)
    : file_(file), line_(line), level_(level) {}

LogMessage::~LogMessage() {
  std::string out = UtcTimestamp();
  out += ' ';
  out += LogLevelName(level_);
  out += ' ';
  out += BaseName(file_);
  out += ':';
  out += std::to_string(line_);
  out += "] ";
  out += stream_.str();
  SinkState& state = Sinks();
  MutexLock lock(&state.mu);
  if (state.sink) {
    state.sink(level_, out);
    return;
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

}  // namespace internal
}  // namespace kvault
