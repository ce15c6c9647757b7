#include "server/sse_sink.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/http_error.h"

namespace kvault {

std::string SseData(const nlohmann::json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

StatusOr<std::shared_ptr<QueueSink>> QueueSink::Create() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    return UnavailableError(std::string("cannot create the completion's "
                                        "event descriptor: ") +
                            std::strerror(errno))
        .WithReason(kReasonOutOfDescriptors);
  }
  return std::shared_ptr<QueueSink>(new QueueSink(fd));
}

QueueSink::~QueueSink() { close(wake_fd_); }

void QueueSink::Push(Item item) {
  MutexLock lock(&mu_);
  if (item.done.has_value()) finished_ = true;
  items_.push_back(std::move(item));
  // Under the lock, so that Take's reset can never eat this signal while
  // leaving the item behind. A full counter (2^64 - 2) cannot happen.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

bool QueueSink::OnToken(const TokenEvent& event) {
  if (client_gone_.load()) return false;
  Push(Item{event, std::nullopt, std::nullopt});
  return true;
}

void QueueSink::OnPromptProgress(const PromptProgress& progress) {
  Push(Item{std::nullopt, std::nullopt, progress});
}

void QueueSink::OnDone(const StatusOr<CompletionResult>& result) {
  Push(Item{std::nullopt, result, std::nullopt});
}

std::vector<QueueSink::Item> QueueSink::Take() {
  MutexLock lock(&mu_);
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));
  std::vector<Item> out;
  out.reserve(items_.size());
  for (Item& item : items_) out.push_back(std::move(item));
  items_.clear();
  return out;
}

bool QueueSink::finished() const {
  MutexLock lock(&mu_);
  return finished_;
}

}  // namespace kvault
