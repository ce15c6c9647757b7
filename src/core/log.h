// Logging: `KV_LOG(INFO) << "loaded " << n << " pages";` writes one line
//   2025-01-02T03:04:05.123456Z INFO page_pool.cc:42] loaded 7 pages
// to stderr (or to the installed sink). Levels: DEBUG, INFO, WARNING, ERROR.
// The streamed expression is not evaluated below the minimum level.
// Thread-safe: lines from concurrent threads never interleave.
#ifndef KVAULT_CORE_LOG_H_
#define KVAULT_CORE_LOG_H_

#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/mutex.h"

namespace kvault {

enum class LogLevel : int { kDebug = 0, kInfo, kWarning, kError };

// Returns "DEBUG", "INFO", "WARNING" or "ERROR".
std::string_view LogLevelName(LogLevel level);

// Drops messages below `level` from now on (default kInfo).
void SetMinLogLevel(LogLevel level);
// Returns the current minimum level.
LogLevel MinLogLevel();

// Receives each formatted line (no trailing newline). Called with the log
// lock held, so it must not log itself.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;
// Routes lines to `sink` (nullptr: back to stderr); returns the previous sink.
LogSink SetLogSink(LogSink sink);

// Captures log lines while alive (for tests); restores the previous sink and
// minimum level on destruction.
class ScopedLogCapture {
 public:
  // Installs the capture and sets the minimum level to `min_level`.
  explicit ScopedLogCapture(LogLevel min_level = LogLevel::kDebug);
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

  // Returns a copy of the lines captured so far, oldest first.
  std::vector<std::string> lines() const;

 private:
  mutable Mutex mu_;
  std::vector<std::string> lines_ GUARDED_BY(mu_);
  LogSink previous_sink_;
  LogLevel previous_level_;
};

namespace internal {

// Returns true when messages of `level` are emitted.
bool LogEnabled(LogLevel level);

// Formats one line and emits it in its destructor.
class LogMessage {
 public:
  LogMessage(const char* file, int line, LogLevel level);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  // Returns the stream the message text is written to.
  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  LogLevel level_;
  std::ostringstream stream_;
};

inline constexpr LogLevel kLogDEBUG = LogLevel::kDebug;
inline constexpr LogLevel kLogINFO = LogLevel::kInfo;
inline constexpr LogLevel kLogWARNING = LogLevel::kWarning;
inline constexpr LogLevel kLogERROR = LogLevel::kError;

}  // namespace internal
}  // namespace kvault

// KV_LOG(severity) << ...; severity is DEBUG, INFO, WARNING or ERROR.
#define KV_LOG(severity)                                                       \
  !::kvault::internal::LogEnabled(::kvault::internal::kLog##severity)          \
      ? (void)0                                                                \
      : ::kvault::internal::Voidify() &                                        \
            ::kvault::internal::LogMessage(__FILE__, __LINE__,                 \
                                           ::kvault::internal::kLog##severity) \
                .stream()

#endif  // KVAULT_CORE_LOG_H_
