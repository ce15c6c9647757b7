#include "server/chat_reply.h"

#include "chat/chat_deltas.h"
#include "chat/chat_parser.h"

namespace kvault {

using nlohmann::json;

ChatReplyReader::ChatReplyReader(chat::ChatSyntax syntax)
    : syntax_(syntax), rng_(std::random_device{}()) {}

void ChatReplyReader::AssignIds(chat::ChatMessage* message) {
  static constexpr char kAlnum[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (size_t i = 0; i < message->tool_calls.size(); ++i) {
    chat::ToolCall& call = message->tool_calls[i];
    if (!call.id.empty()) continue;
    while (ids_.size() <= i) {
      std::string id = "call_";
      for (int k = 0; k < 24; ++k) id += kAlnum[rng_() % (sizeof(kAlnum) - 1)];
      ids_.push_back(std::move(id));
    }
    call.id = ids_[i];
  }
}

chat::ChatMessage ChatReplyReader::ParseWhole(std::string_view text,
                                              bool cut_off) const {
  chat::ChatMessage whole = chat::ParseChatOutput(text, syntax_, false);
  if (!cut_off) return whole;
  // The stream's view keeps the call the limit cut, as far as it got.
  chat::ChatMessage shown = chat::ParseChatOutput(text, syntax_, true);
  return shown.tool_calls.size() > whole.tool_calls.size() ? shown : whole;
}

json ChatReplyReader::Message(std::string_view text, bool cut_off) {
  chat::ChatMessage m = ParseWhole(text, cut_off);
  AssignIds(&m);
  sent_ = m;
  json out{{"role", "assistant"}};
  out["content"] =
      m.content.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.content);
  if (!m.reasoning_content.empty()) {
    out["reasoning_content"] = m.reasoning_content;
  }
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCall& c : m.tool_calls) {
      calls.push_back({{"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}},
                       {"id", c.id}});
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

std::vector<json> ChatReplyReader::Advance(chat::ChatMessage next) {
  AssignIds(&next);
  std::vector<json> out;
  for (const nlohmann::ordered_json& d : chat::ChatDeltas(sent_, next)) {
    out.push_back(json::parse(d.dump()));
  }
  // A call shown while it was written stays shown, even when later text
  // broke its block (a stream cannot take a delta back).
  if (next.tool_calls.size() < sent_.tool_calls.size()) {
    next.tool_calls = std::move(sent_.tool_calls);
  }
  sent_ = std::move(next);
  return out;
}

std::vector<json> ChatReplyReader::Feed(std::string_view text) {
  if (text.empty()) return {};
  text_.append(text);
  return Advance(chat::ParseChatOutput(text_, syntax_, /*is_partial=*/true));
}

std::vector<json> ChatReplyReader::Finish(bool cut_off) {
  return Advance(ParseWhole(text_, cut_off));
}

std::string ChatFinishReason(const std::string& finish_reason,
                             bool has_tool_calls) {
  return has_tool_calls && finish_reason == "stop" ? "tool_calls"
                                                   : finish_reason;
}

}  // namespace kvault
