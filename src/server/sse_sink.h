// The engine -> HTTP hand-over of one completion's output.
//
// QueueSink is the CompletionSink the engine writes to (on its scheduler
// thread, never blocking): it only queues the events and signals its event
// descriptor (an eventfd). The HTTP worker thread that owns the request
// waits on that descriptor together with its connection (client gone,
// server stopping; http_message.h's EventWait), drains the queue
// (stream_response.h) and formats the events with a StreamFormatter as
// Server-Sent Events ("data: <json>\n\n"). Once the client is gone,
// OnToken returns false so the engine frees the slot.
#ifndef KVAULT_SERVER_SSE_SINK_H_
#define KVAULT_SERVER_SSE_SINK_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "engine/engine.h"
#include "server/event_fd.h"
#include "server/http_message.h"

namespace kvault {

// The OpenAI stream terminator.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Returns one SSE event carrying `j`: "data: <json>\n\n".
std::string SseData(const nlohmann::json& j);

class QueueSink : public CompletionSink,
                  public std::enable_shared_from_this<QueueSink> {
 public:
  // Returns a sink with its event descriptor for `num_tasks` (>= 1) tasks
  // of one request (several choices or prompts, streamed together);
  // Unavailable (reason out_of_descriptors) when the process has no
  // descriptor left.
  static StatusOr<std::shared_ptr<QueueSink>> Create(uint32_t num_tasks = 1);
  QueueSink(const QueueSink&) = delete;
  QueueSink& operator=(const QueueSink&) = delete;

  // One queued event: exactly one of the admission (the slot), a token, a
  // prompt progress report or the final result; `task` says whose.
  struct Item {
    std::optional<TokenEvent> token;
    std::optional<StatusOr<CompletionResult>> done;
    std::optional<PromptProgress> progress;
    std::optional<uint32_t> start;
    uint32_t task = 0;
  };

  // Returns the CompletionSink of task `task` (< num_tasks): its events
  // are queued here tagged with it. Task 0's is this sink itself.
  std::shared_ptr<CompletionSink> ForTask(uint32_t task);
  // Returns how many tasks this sink serves.
  uint32_t num_tasks() const { return num_tasks_; }

  // Queues the admission.
  void OnStart(uint32_t slot) override EXCLUDES(mu_);
  // Queues the token; returns false once the client is gone.
  bool OnToken(const TokenEvent& event) override EXCLUDES(mu_);
  // Queues the progress report.
  void OnPromptProgress(const PromptProgress& progress) override EXCLUDES(mu_);
  // Queues the result and wakes the waiter.
  void OnDone(const StatusOr<CompletionResult>& result) override EXCLUDES(mu_);

  // Returns the descriptor that polls readable while items are queued.
  int wake_fd() const { return wake_.fd(); }
  // Returns the items queued (possibly none), oldest first, and clears
  // wake_fd()'s readiness.
  std::vector<Item> Take() EXCLUDES(mu_);
  // Makes every later OnToken return false (the client went away).
  void MarkClientGone() { client_gone_.store(true); }
  // Returns true once MarkClientGone was called.
  bool client_gone() const { return client_gone_.load(); }
  // Returns true once every task's OnDone was called (their items may
  // still be queued).
  bool finished() const EXCLUDES(mu_);

 private:
  class TaskSink;
  QueueSink(EventFd wake, uint32_t num_tasks)
      : wake_(std::move(wake)), num_tasks_(num_tasks) {}
  // Queues `item` and makes wake_fd() readable.
  void Push(Item item) EXCLUDES(mu_);

  const EventFd wake_;
  const uint32_t num_tasks_;
  mutable Mutex mu_;
  std::deque<Item> items_ GUARDED_BY(mu_);
  uint32_t num_finished_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> client_gone_{false};
};

// Turns one request's events into SSE text; runs on the HTTP worker thread.
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  // Returns the SSE text for one token (may be empty: nothing to send);
  // `slot` is the slot running the task, -1 when not known.
  virtual std::string Token(const TokenEvent& event, int slot) = 0;
  // Returns the SSE text for the request's admission into `slot`
  // (CompletionSink::OnStart); "" for APIs that announce nothing then.
  virtual std::string Start(int slot) { return ""; }
  // Returns the SSE text for a prompt progress report (return_progress);
  // "" for APIs that do not stream one.
  virtual std::string Progress(const PromptProgress& progress, int slot) {
    return "";
  }
  // Returns the SSE text that ends a successful stream (final object, and
  // "data: [DONE]" for the OpenAI formats).
  virtual std::string Done(const CompletionResult& result) = 0;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_SSE_SINK_H_
