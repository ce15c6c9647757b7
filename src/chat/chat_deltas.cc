#include "chat/chat_deltas.h"

#include <string>

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;

// Returns the text `next` adds to `prev`, or "" when it does not extend it.
std::string Grown(const std::string& prev, const std::string& next) {
  if (next.size() <= prev.size() || next.compare(0, prev.size(), prev) != 0) {
    return "";
  }
  return next.substr(prev.size());
}

Json CallDelta(size_t index, const ToolCall* prev, const ToolCall& next) {
  Json fn = Json::object();
  Json call = {{"index", index}};
  if (prev == nullptr) {
    if (!next.id.empty()) call["id"] = next.id;
    call["type"] = "function";
    fn["name"] = next.name;
    fn["arguments"] = next.arguments;
  } else {
    fn["arguments"] = Grown(prev->arguments, next.arguments);
  }
  call["function"] = std::move(fn);
  return {{"tool_calls", Json::array({std::move(call)})}};
}

}  // namespace

std::vector<Json> ChatDeltas(const ChatMessage& prev, const ChatMessage& next) {
  std::vector<Json> out;
  if (std::string r = Grown(prev.reasoning_content, next.reasoning_content);
      !r.empty()) {
    out.push_back({{"reasoning_content", std::move(r)}});
  }
  if (std::string c = Grown(prev.content, next.content); !c.empty()) {
    out.push_back({{"content", std::move(c)}});
  }
  for (size_t i = 0; i < next.tool_calls.size(); ++i) {
    if (i >= prev.tool_calls.size()) {
      out.push_back(CallDelta(i, nullptr, next.tool_calls[i]));
    } else if (!Grown(prev.tool_calls[i].arguments,
                      next.tool_calls[i].arguments)
                    .empty()) {
      out.push_back(CallDelta(i, &prev.tool_calls[i], next.tool_calls[i]));
    }
  }
  return out;
}

}  // namespace kvault::chat
