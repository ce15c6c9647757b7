#include "server/sse_sink.h"

#include "server/http_error.h"

namespace kvault {

std::string SseData(const nlohmann::json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

bool QueueSink::OnToken(const TokenEvent& event) {
  if (client_gone_.load()) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{event, std::nullopt, std::nullopt});
  }
  cv_.notify_one();
  return true;
}

void QueueSink::OnPromptProgress(const PromptProgress& progress) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{std::nullopt, std::nullopt, progress});
  }
  cv_.notify_one();
}

void QueueSink::OnDone(const StatusOr<CompletionResult>& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{std::nullopt, result, std::nullopt});
    finished_ = true;
  }
  cv_.notify_one();
}

std::vector<QueueSink::Item> QueueSink::Wait(
    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return !items_.empty(); });
  std::vector<Item> out;
  out.reserve(items_.size());
  for (Item& item : items_) out.push_back(std::move(item));
  items_.clear();
  return out;
}

bool QueueSink::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace kvault
