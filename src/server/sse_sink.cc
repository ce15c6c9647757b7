#include "server/sse_sink.h"

#include <utility>

#include "core/check.h"
#include "server/http_error.h"

namespace kvault {

std::string SseData(const nlohmann::json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

// The sink of one task of several: tags its events and queues them in the
// shared QueueSink.
class QueueSink::TaskSink : public CompletionSink {
 public:
  TaskSink(std::shared_ptr<QueueSink> queue, uint32_t task)
      : queue_(std::move(queue)), task_(task) {}
  void OnStart(uint32_t slot) override {
    queue_->Push(Item{.start = slot, .task = task_});
  }
  bool OnToken(const TokenEvent& event) override {
    if (queue_->client_gone()) return false;
    queue_->Push(Item{.token = event, .task = task_});
    return true;
  }
  void OnPromptProgress(const PromptProgress& progress) override {
    queue_->Push(Item{.progress = progress, .task = task_});
  }
  void OnDone(const StatusOr<CompletionResult>& result) override {
    queue_->Push(Item{.done = result, .task = task_});
  }

 private:
  const std::shared_ptr<QueueSink> queue_;
  const uint32_t task_;
};

StatusOr<std::shared_ptr<QueueSink>> QueueSink::Create(uint32_t num_tasks) {
  KV_CHECK(num_tasks >= 1);
  KV_ASSIGN_OR_RETURN(EventFd wake, EventFd::Create("completion"));
  return std::shared_ptr<QueueSink>(new QueueSink(std::move(wake), num_tasks));
}

std::shared_ptr<CompletionSink> QueueSink::ForTask(uint32_t task) {
  KV_CHECK(task < num_tasks_);
  if (task == 0) return shared_from_this();
  return std::make_shared<TaskSink>(shared_from_this(), task);
}

void QueueSink::Push(Item item) {
  MutexLock lock(&mu_);
  if (item.done.has_value()) ++num_finished_;
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
  return num_finished_ == num_tasks_;
}

}  // namespace kvault
