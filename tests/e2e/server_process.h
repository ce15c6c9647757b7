// ServerProcess: runs the real `kvault serve` binary for end-to-end tests.
// It starts the binary with --port 0, reads its log (stderr) on a thread,
// learns the port from the "listening on" line and waits for "ready:" —
// no sleeps, only the server's own announcements.
#ifndef KVAULT_TESTS_E2E_SERVER_PROCESS_H_
#define KVAULT_TESTS_E2E_SERVER_PROCESS_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status_or.h"

namespace kvault::e2e {

class ServerProcess {
 public:
  // Starts `KVAULT_BINARY serve <args> --port PORT` (0: a free one) and
  // waits until it is ready (or exited / `timeout_s` passed: an error with
  // its log tail).
  static StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& args, double timeout_s = 120,
      uint16_t port = 0);
  // Kills the process (SIGKILL) if still running.
  ~ServerProcess();

  // Returns the port the server listens on.
  uint16_t port() const { return port_; }
  // Returns the server's process id.
  pid_t pid() const { return pid_; }
  // Sends SIGTERM and waits for exit; returns the exit code (128+signal
  // when killed by a signal), or an error after `timeout_s`.
  StatusOr<int> Stop(double timeout_s = 60);
  // Returns everything the server logged so far.
  std::string Log() const;
  // Waits until a log line contains `text` (or `timeout_s`); returns
  // whether it appeared.
  bool WaitForLog(const std::string& text, double timeout_s = 60);

 private:
  ServerProcess() = default;
  void ReadLog(int fd);

  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string log_;
  bool log_closed_ = false;
};

// Stops `server` with SIGTERM; returns "exit N" or the error (with the
// log tail), so a test can EXPECT_EQ(StopServer(p), "exit 0").
std::string StopServer(ServerProcess* server);

// Returns the absolute path of ../shared/<rel> (beside the source root).
std::string SharedPath(const std::string& rel);
// Returns true when the file exists.
bool FileExists(const std::string& path);
// Returns a fresh empty temporary directory.
std::string MakeTempDir(const std::string& tag);
// Returns the resident set size of `pid` in kB (VmRSS), or -1.
long RssKb(pid_t pid);

// What one run of the kvault binary gave.
struct CommandRun {
  int exit_code = -1;     // -1: it did not start or exit normally
  std::string output;     // stdout and stderr
};
// Runs `KVAULT_BINARY <args>` (a shell command line) to its end.
CommandRun Kvault(const std::string& args);

}  // namespace kvault::e2e

#endif  // KVAULT_TESTS_E2E_SERVER_PROCESS_H_
