#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

namespace kvault::e2e {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string Tail(const std::string& log) {
  return log.size() > 4000 ? log.substr(log.size() - 4000) : log;
}

}  // namespace

StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& args, double timeout_s, uint16_t port) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return InternalError("pipe failed");
  std::vector<std::string> argv_s = {KVAULT_BINARY, "serve"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.push_back("--port");
  argv_s.push_back(std::to_string(port));
  // /metrics is off by default, as in llama-server; every test may read it.
  argv_s.push_back("--metrics");
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->pid_ = pid;
  p->reader_ = std::thread([raw = p.get(), fd = fds[0]] { raw->ReadLog(fd); });
  const bool ready = p->WaitForLog("] ready:", timeout_s);
  std::unique_lock lock(p->mu_);
  std::smatch m;
  static const std::regex kListen("listening on http://[^:]+:([0-9]+)");
  if (!ready || !std::regex_search(p->log_, m, kListen)) {
    return InternalError("server did not become ready; log:\n" +
                         Tail(p->log_));
  }
  p->port_ = static_cast<uint16_t>(std::stoi(m[1].str()));
  return p;
}

void ServerProcess::ReadLog(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard lock(mu_);
    if (n <= 0) {
      log_closed_ = true;
      cv_.notify_all();
      break;
    }
    log_.append(buf, static_cast<size_t>(n));
    cv_.notify_all();
  }
  close(fd);
}

bool ServerProcess::WaitForLog(const std::string& text, double timeout_s) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, Ms(timeout_s), [&] {
    return log_.find(text) != std::string::npos || log_closed_;
  }) && log_.find(text) != std::string::npos;
}

std::string ServerProcess::Log() const {
  std::lock_guard lock(mu_);
  return log_;
}

StatusOr<int> ServerProcess::Stop(double timeout_s) {
  if (exited_) return FailedPreconditionError("already stopped");
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + Ms(timeout_s);
  int status = 0;
  // The log pipe closes when the process exits: wait on it, then reap
  // (blocking: the pipe closes while the process is already exiting).
  bool closed = false;
  {
    std::unique_lock lock(mu_);
    closed = cv_.wait_until(lock, deadline, [&] { return log_closed_; });
  }
  if (!closed) {
    return UnavailableError("server did not exit after SIGTERM; log:\n" +
                            Tail(Log()));
  }
  waitpid(pid_, &status, 0);
  exited_ = true;
  if (reader_.joinable()) reader_.join();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

ServerProcess::~ServerProcess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) reader_.join();
}

std::string StopServer(ServerProcess* server) {
  StatusOr<int> code = server->Stop();
  if (!code.ok()) return code.status().ToString();
  return "exit " + std::to_string(*code);
}

std::string SharedPath(const std::string& rel) {
  return std::string(KVAULT_SOURCE_DIR) + "/../shared/" + rel;
}

long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string MakeTempDir(const std::string& tag) {
  std::string tmpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR")
                                                       : "/tmp") +
                     "/kvault-e2e-" + tag + "-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

CommandRun Kvault(const std::string& args) {
  CommandRun r;
  FILE* out =
      ::popen((std::string(KVAULT_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (out == nullptr) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), out)) {
    r.output.append(buf, n);
  }
  const int status = ::pclose(out);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kvault::e2e
