// ChoiceStreamMerger: the tasks of one request that asks for several
// choices (OpenAI n > 1, llama-server n_cmpl) or sends a list of prompts,
// streamed as one Server-Sent Events stream, as llama-server streams them.
// Each task's StreamFormatter writes its events as if it were alone; the
// merger tags every event with the task's index (OpenAI: each choice's
// "index", and the first task's id and created on every chunk;
// llama-server's API: the event's "index") and keeps back what the
// whole stream says only once: OpenAI's usage, summed over the tasks and
// sent in one chunk of its own at the end, and the "data: [DONE]"
// terminator after it.
#ifndef KVAULT_SERVER_CHOICE_STREAM_MERGER_H_
#define KVAULT_SERVER_CHOICE_STREAM_MERGER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvault {

class ChoiceStreamMerger {
 public:
  // `openai`: the tasks' formatters write OpenAI chunks (choices, usage,
  // [DONE]); otherwise llama-server's /completion events.
  explicit ChoiceStreamMerger(bool openai) : openai_(openai) {}

  // Returns task `task`'s SSE text `events` (whole "data: ...\n\n" events)
  // tagged for the merged stream, less its usage and terminator.
  std::string Tag(uint32_t task, std::string_view events);
  // Returns what ends the merged stream, once every task is done: the
  // summed usage chunk (when the tasks sent usage) and the terminator
  // (OpenAI), or nothing (llama-server's API has neither).
  std::string End() const;

 private:
  // Tags one event's JSON; returns false when nothing of it is to be sent.
  bool TagJson(uint32_t task, nlohmann::json& event);

  const bool openai_;
  nlohmann::json usage_;     // summed usage; null until a task sent some
  nlohmann::json envelope_;  // id, object, created, model of the chunks
};

}  // namespace kvault

#endif  // KVAULT_SERVER_CHOICE_STREAM_MERGER_H_
