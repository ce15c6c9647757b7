#include "server/stream_response.h"

#include <chrono>

#include "server/http_error.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;

// How long a waiting HTTP thread sleeps between checks of the stop flag and
// the client connection.
constexpr milliseconds kPollInterval{100};
// How long a stopping server waits for the engine to end a cancelled task.
constexpr milliseconds kCancelGrace{10000};

// Ends the job early: the engine frees the slot at its next token at the
// latest.
void Abandon(StreamJob& job) {
  job.sink->MarkClientGone();
  job.engine->Cancel(job.task_id);
}

// Returns the SSE text of `items`; sets *done when the result was among
// them.
std::string FormatItems(StreamJob& job, std::vector<QueueSink::Item>& items,
                        bool* done) {
  std::string text;
  for (QueueSink::Item& item : items) {
    if (item.token.has_value()) {
      text += job.formatter->Token(*item.token, int(item.token->slot));
    } else if (item.progress.has_value()) {
      text += job.formatter->Progress(*item.progress, int(item.progress->slot));
    } else if (item.done.has_value()) {
      *done = true;
      const StatusOr<CompletionResult>& r = *item.done;
      text += r.ok() ? job.formatter->Done(*r)
                     : SseData(ErrorJson(HttpErrorFromStatus(r.status())));
    }
  }
  items.clear();
  return text;
}

// Ends a stream the stopping server cuts: what the engine already queued,
// then (unless that was the end) an error event; always the last call.
bool EndStopped(StreamJob& job, ChunkSink& out) {
  std::vector<QueueSink::Item> items = job.sink->Wait(milliseconds(0));
  bool done = false;
  std::string text = FormatItems(job, items, &done);
  if (!done) {
    Abandon(job);
    text += SseData(ErrorJson(MakeHttpError(503, kErrUnavailable,
                                            "the server is stopping; task " +
                                                std::to_string(job.task_id) +
                                                " was cancelled",
                                            "server_stopping")));
  }
  const bool written = out.Write(text);
  out.Done();
  return written;
}

// One call of the connection's stream pump: writes what is queued.
// Returns false to abort the response (the client is gone).
bool PumpStream(StreamJob& job, ChunkSink& out) {
  if (job.stopping != nullptr && job.stopping->load()) {
    return EndStopped(job, out);
  }
  std::vector<QueueSink::Item> items = job.sink->Wait(kPollInterval);
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
                                         const std::atomic<bool>& stopping,
                                         std::vector<TokenEvent>* events,
                                         const std::function<bool()>& client_gone) {
  bool cancelled = false;
  milliseconds waited_after_cancel{0};
  while (true) {
    for (QueueSink::Item& item : sink->Wait(kPollInterval)) {
      if (item.token.has_value()) {
        events->push_back(std::move(*item.token));
      } else if (item.done.has_value()) {
        return std::move(*item.done);
      }
    }
    if (!cancelled && client_gone && client_gone()) {
      // Nobody will read the answer: free the slot now. The result still
      // arrives (cancelled) and ends the wait.
      sink->MarkClientGone();
      engine->Cancel(task_id);
      cancelled = true;
      continue;
    }
    if (stopping.load() && !cancelled) {
      sink->MarkClientGone();
      engine->Cancel(task_id);
      cancelled = true;
    }
    if (cancelled) {
      waited_after_cancel += kPollInterval;
      if (waited_after_cancel > kCancelGrace) {
        return UnavailableError("server is stopping; task " +
                                std::to_string(task_id) + " abandoned")
            .WithReason(kReasonServerStopping);
      }
    }
  }
}

}  // namespace kvault
