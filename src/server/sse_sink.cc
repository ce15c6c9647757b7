#include "server/sse_sink.h"

#include "server/http_error.h"

namespace kvault {

std::string SseData(const nlohmann::json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

bool QueueSink::OnToken(const TokenEvent& event) {
  if (client_gone_.load()) return false;
  {
    MutexLock lock(&mu_);
    items_.push_back(Item{event, std::nullopt, std::nullopt});
  }
  cv_.Signal();
  return true;
}

void QueueSink::OnPromptProgress(const PromptProgress& progress) {
  {
    MutexLock lock(&mu_);
    items_.push_back(Item{std::nullopt, std::nullopt, progress});
  }
  cv_.Signal();
}

void QueueSink::OnDone(const StatusOr<CompletionResult>& result) {
  {
    MutexLock lock(&mu_);
    items_.push_back(Item{std::nullopt, result, std::nullopt});
    finished_ = true;
  }
  cv_.Signal();
}

std::vector<QueueSink::Item> QueueSink::Wait(
    std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  cv_.WaitUntil(&mu_, deadline, [this]() REQUIRES(mu_) { return !items_.empty(); });
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
