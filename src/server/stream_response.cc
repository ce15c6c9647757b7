#include "server/stream_response.h"

#include <chrono>

#include "server/http_error.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;

// How long a stopping server waits for the engine to end a cancelled task.
constexpr milliseconds kCancelGrace{10000};

// Ends the job early: the engine frees the slots at their next token at
// the latest.
void Abandon(StreamJob& job) {
  job.sink->MarkClientGone();
  for (uint64_t task : job.task_ids) job.engine->Cancel(task);
}

// Returns the SSE text of one item of its task's formatter; counts a
// result in *num_done.
std::string FormatItem(StreamFormatter& formatter, QueueSink::Item& item,
                       uint32_t* num_done) {
  if (item.start.has_value()) return formatter.Start(int(*item.start));
  if (item.token.has_value()) {
    return formatter.Token(*item.token, int(item.token->slot));
  }
  if (item.progress.has_value()) {
    return formatter.Progress(*item.progress, int(item.progress->slot));
  }
  if (!item.done.has_value()) return "";
  ++*num_done;
  const StatusOr<CompletionResult>& r = *item.done;
  return r.ok() ? formatter.Done(*r)
                : SseData(ErrorJson(HttpErrorFromStatus(r.status())));
}

// Returns the SSE text of `items` (several tasks' merged); sets *done once
// every task's result was among the items so far.
std::string FormatItems(StreamJob& job, std::vector<QueueSink::Item>& items,
                        bool* done) {
  std::string text;
  for (QueueSink::Item& item : items) {
    std::string events =
        FormatItem(*job.formatters[item.task], item, &job.num_done);
    text += job.merger ? job.merger->Tag(item.task, events) : events;
  }
  items.clear();
  *done = job.num_done == job.task_ids.size();
  if (*done && job.merger) text += job.merger->End();
  return text;
}

// Ends a stream the stopping server cuts: what the engine already queued,
// then (unless that was the end) an error event; always the last call.
bool EndStopped(StreamJob& job, ChunkSink& out) {
  std::vector<QueueSink::Item> items = job.sink->Take();
  bool done = false;
  std::string text = FormatItems(job, items, &done);
  if (!done) {
    Abandon(job);
    text += SseData(ErrorJson(MakeHttpError(503, kErrUnavailable,
                                            "the server is stopping; task " +
                                                std::to_string(
                                                    job.task_ids.front()) +
                                                " was cancelled",
                                            "server_stopping")));
  }
  const bool written = out.Write(text);
  out.Done();
  return written;
}

// One call of the connection's stream pump: waits for the engine's next
// events (or the client hanging up, or the server stopping) and writes
// them. Returns false to abort the response (the client is gone).
bool PumpStream(StreamJob& job, ChunkSink& out) {
  switch (out.Wait(job.sink->wake_fd(), WaitAlso{}, kNoDeadline)) {
    case WaitResult::kStopping:
      return EndStopped(job, out);
    case WaitResult::kClientGone:
      Abandon(job);
      return false;
    case WaitResult::kReady:
    case WaitResult::kTimedOut:
      break;
  }
  std::vector<QueueSink::Item> items = job.sink->Take();
  bool done = false;
  std::string text = FormatItems(job, items, &done);
  if (!out.Write(text)) {
    Abandon(job);
    return false;
  }
  if (done) out.Done();
  return true;
}

}  // namespace

void ServeStream(std::shared_ptr<StreamJob> job, HttpResponse* res) {
  res->SetHeader("Cache-Control", "no-cache");
  res->content_type = "text/event-stream";
  res->pump = [job](ChunkSink& out) { return PumpStream(*job, out); };
  // Runs when the connection drops the response, however it ended: a task
  // that has not finished lost its client.
  res->on_stream_end = [job](bool /*completed*/) {
    if (!job->sink->finished()) Abandon(*job);
  };
}

StatusOr<CompletionResult> WaitForResult(Engine* engine, uint64_t task_id,
                                         QueueSink* sink,
                                         const HttpRequest& req,
                                         std::vector<TokenEvent>* events) {
  bool cancelled = false;
  WaitClock::time_point deadline = kNoDeadline;
  while (true) {
    for (QueueSink::Item& item : sink->Take()) {
      if (item.token.has_value()) {
        events->push_back(std::move(*item.token));
      } else if (item.done.has_value()) {
        return std::move(*item.done);
      }
    }
    // Once cancelled, only the result (or the grace deadline) is awaited.
    const WaitAlso also{.client_gone = !cancelled, .stopping = !cancelled};
    switch (req.Wait(sink->wake_fd(), also, deadline)) {
      case WaitResult::kReady:
        break;
      case WaitResult::kClientGone:
      case WaitResult::kStopping:
        // Nobody will read the answer: free the slot now, as llama-server
        // does. The result still arrives (cancelled) and ends the wait.
        sink->MarkClientGone();
        engine->Cancel(task_id);
        cancelled = true;
        deadline = WaitClock::now() + kCancelGrace;
        break;
      case WaitResult::kTimedOut:
        return UnavailableError("server is stopping; task " +
                                std::to_string(task_id) + " abandoned")
            .WithReason(kReasonServerStopping);
    }
  }
}

}  // namespace kvault
