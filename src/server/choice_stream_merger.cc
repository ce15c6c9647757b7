#include "server/choice_stream_merger.h"

#include "server/sse_sink.h"

namespace kvault {
namespace {

using nlohmann::json;

constexpr std::string_view kDataPrefix = "data: ";

// Adds the numbers of `add` into `sum` (nested objects too).
void AddCounts(const json& add, json& sum) {
  for (auto it = add.begin(); it != add.end(); ++it) {
    if (it->is_number_integer() && (!sum.contains(it.key()) ||
                                    sum[it.key()].is_number_integer())) {
      sum[it.key()] = sum.value(it.key(), int64_t{0}) + it->get<int64_t>();
    } else if (it->is_object()) {
      if (!sum.contains(it.key())) sum[it.key()] = json::object();
      AddCounts(*it, sum[it.key()]);
    }
  }
}

}  // namespace

bool ChoiceStreamMerger::TagJson(uint32_t task, json& event) {
  if (event.contains("error")) return true;  // passed on as it is
  if (!openai_) {
    event["index"] = task;
    return true;
  }
  if (auto usage = event.find("usage"); usage != event.end()) {
    if (usage->is_object()) {
      if (usage_.is_null()) usage_ = json::object();
      AddCounts(*usage, usage_);
    }
    event.erase("usage");
  }
  // One response: every chunk carries the first task's id and time.
  for (const char* key : {"id", "object", "created", "model",
                          "system_fingerprint"}) {
    if (!event.contains(key)) continue;
    if (envelope_.contains(key)) {
      event[key] = envelope_[key];
    } else {
      envelope_[key] = event[key];
    }
  }
  auto choices = event.find("choices");
  if (choices == event.end() || !choices->is_array()) return true;
  if (choices->empty()) return false;  // a usage chunk: sent at the end
  for (json& choice : *choices) choice["index"] = task;
  return true;
}

std::string ChoiceStreamMerger::Tag(uint32_t task, std::string_view events) {
  std::string out;
  while (!events.empty()) {
    size_t end = events.find("\n\n");
    std::string_view event = events.substr(0, end);
    events.remove_prefix(end == std::string_view::npos ? events.size()
                                                        : end + 2);
    if (!event.starts_with(kDataPrefix)) {
      out.append(event).append("\n\n");
      continue;
    }
    std::string_view payload = event.substr(kDataPrefix.size());
    if (payload == "[DONE]") continue;
    json j = json::parse(payload, nullptr, false);
    if (!j.is_object()) {
      out.append(event).append("\n\n");
    } else if (TagJson(task, j)) {
      out += SseData(j);
    }
  }
  return out;
}

std::string ChoiceStreamMerger::End() const {
  if (!openai_) return "";
  std::string out;
  if (!usage_.is_null()) {
    json chunk = envelope_.is_null() ? json::object() : envelope_;
    chunk["choices"] = json::array();
    chunk["usage"] = usage_;
    out += SseData(chunk);
  }
  return out + std::string(kSseDone);
}

}  // namespace kvault
