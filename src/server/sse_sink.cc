#include "server/sse_sink.h"

#include <utility>

#include "server/http_error.h"

namespace kvault {

std::string SseData(const nlohmann::json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

StatusOr<std::shared_ptr<QueueSink>> QueueSink::Create() {
  KV_ASSIGN_OR_RETURN(EventFd wake, EventFd::Create("completion"));
  return std::shared_ptr<QueueSink>(new QueueSink(std::move(wake)));
}

void QueueSink::Push(Item item) {
  MutexLock lock(&mu_);
  if (item.done.has_value()) finished_ = true;
  items_.push_back(std::move(item));
  // Under the lock, so that Take's reset can never eat this signal while
  // leaving the item behind.
  wake_.Signal();
}

void QueueSink::OnStart(uint32_t slot) {
  Push(Item{.start = slot});
}

bool QueueSink::OnToken(const TokenEvent& event) {
  if (client_gone_.load()) return false;
  Push(Item{.token = event});
  return true;
}

void QueueSink::OnPromptProgress(const PromptProgress& progress) {
  Push(Item{.progress = progress});
}

void QueueSink::OnDone(const StatusOr<CompletionResult>& result) {
  Push(Item{.done = result});
}

std::vector<QueueSink::Item> QueueSink::Take() {
  MutexLock lock(&mu_);
  wake_.Clear();
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
