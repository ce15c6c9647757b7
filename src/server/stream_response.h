// Writing a completion to its HTTP client: streamed as Server-Sent Events
// through the connection's chunked stream (HttpResponse::pump), or waited
// for whole. When the client has gone (a write fails, or the connection
// ends the stream early) the sink is marked so the engine's next OnToken
// returns false, and the task is cancelled: the slot is freed either way.
// Waiting is event-driven: the sink's descriptor, the client's socket and
// the server's stop signal are polled together (http_message.h's
// EventWait). When the server stops, a stream ends with a last event
// data: {"error": {...}, "reason": "server_stopping"} and its terminating
// chunk.
#ifndef KVAULT_SERVER_STREAM_RESPONSE_H_
#define KVAULT_SERVER_STREAM_RESPONSE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "server/choice_stream_merger.h"
#include "server/http_message.h"
#include "server/sse_sink.h"

namespace kvault {

// What a streamed response needs after the handler returned: one task, or
// several (n > 1 choices, a list of prompts) sharing one sink, each with
// its formatter, merged into one stream by a ChoiceStreamMerger.
struct StreamJob {
  Engine* engine = nullptr;
  std::vector<uint64_t> task_ids;  // by task index (the sink's tags)
  std::shared_ptr<QueueSink> sink;
  std::vector<std::unique_ptr<StreamFormatter>> formatters;  // by task
  std::unique_ptr<ChoiceStreamMerger> merger;  // with several tasks
  uint32_t num_done = 0;  // tasks whose result was formatted
};

// Sets `res` to stream `job` as text/event-stream. An engine error, or the
// server stopping, ends the stream with `data: {"error": ...}`.
void ServeStream(std::shared_ptr<StreamJob> job, HttpResponse* res);

// Waits (on the sink's and the connection's events, req.Wait) for a
// non-streamed task's result, collecting its token events (returned
// through `events`); cancels the task when the server stops or the client
// hangs up, as llama-server frees the slot of a request nobody waits for.
StatusOr<CompletionResult> WaitForResult(Engine* engine, uint64_t task_id,
                                         QueueSink* sink,
                                         const HttpRequest& req,
                                         std::vector<TokenEvent>* events);

}  // namespace kvault

#endif  // KVAULT_SERVER_STREAM_RESPONSE_H_
