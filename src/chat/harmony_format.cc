// GPT-OSS "harmony" replies: a sequence of messages, each
// "[<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ to=..][
// <|constrain|>json]<|message|>BODY" ended by <|end|>, <|call|>, <|return|>
// or the next <|start|>. Channel "analysis" is reasoning, "final" (and
// recipient-less "commentary") is content, and a "functions.NAME" recipient
// makes BODY the arguments of a call to NAME.
#include <string>
#include <vector>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"

namespace kvault::chat {
namespace {

constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
const std::vector<std::string_view> kEnds = {"<|end|>", "<|call|>",
                                             "<|return|>", "<|start|>"};

// Returns the word after `key` in `header` (up to a space or '<').
std::string_view Field(std::string_view header, std::string_view key) {
  size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  return rest.substr(0, rest.find_first_of(" <"));
}

struct Body {
  std::string_view text;
  bool closed = false;
  size_t next = 0;  // where the following message starts
};

Body FindBody(std::string_view text, size_t start, bool partial) {
  Body b;
  size_t end = std::string_view::npos, len = 0;
  for (std::string_view e : kEnds) {
    size_t at = text.find(e, start);
    if (at < end) end = at, len = (e == kStart ? 0 : e.size());
  }
  b.closed = end != std::string_view::npos;
  b.text = text.substr(start, b.closed ? end - start : std::string_view::npos);
  if (!b.closed && partial) {
    b.text.remove_suffix(PartialMarkerSuffix(b.text, kEnds));
  }
  b.next = b.closed ? end + len : text.size();
  return b;
}

void AppendReasoning(std::string_view text, ChatMessage* msg) {
  if (text.empty()) return;
  if (!msg->reasoning_content.empty()) msg->reasoning_content += "\n";
  msg->reasoning_content += text;
}

// Places one message; false when it must be held (an unfinished call).
bool PlaceMessage(std::string_view raw, std::string_view header,
                  const Body& body, const ChatSyntax& syntax, bool partial,
                  ChatMessage* msg) {
  std::string_view recipient = Field(header, " to=");
  std::string_view channel = Field(header, kChannel);
  if (recipient.starts_with("functions.") && syntax.parse_tool_calls) {
    if (!body.closed && partial) return false;
    auto args = ParseJsonOrDiscard(TrimSpace(body.text));
    if (args.is_object() && recipient.size() > 10) {
      msg->tool_calls.push_back(
          {std::string(recipient.substr(10)), DumpJson(args), ""});
    } else {
      msg->content += raw;
    }
  } else if (channel == "analysis") {
    if (syntax.reasoning_format == ReasoningFormat::kNone) {
      msg->content += raw;
    } else {
      AppendReasoning(body.text, msg);
    }
  } else {
    msg->content += body.text;
  }
  return true;
}

}  // namespace

ChatMessage ParseHarmony(std::string_view text, const ChatSyntax& syntax,
                         bool partial) {
  ChatMessage msg;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t at = std::min(text.find(kStart, pos), text.find(kChannel, pos));
    if (at == std::string_view::npos) {  // text outside any message
      std::string_view tail = text.substr(pos);
      if (partial)
        tail.remove_suffix(PartialMarkerSuffix(tail, {kStart, kChannel}));
      msg.content += tail;
      break;
    }
    msg.content += text.substr(pos, at - pos);
    size_t header_end = text.find(kMessage, at);
    if (header_end == std::string_view::npos) {
      if (!partial) msg.content += text.substr(at);
      break;
    }
    std::string_view header = text.substr(at, header_end - at);
    Body body = FindBody(text, header_end + kMessage.size(), partial);
    std::string_view raw = text.substr(at, body.next - at);
    if (!body.closed && partial) {
      raw =
          text.substr(at, header_end + kMessage.size() - at + body.text.size());
    }
    if (!PlaceMessage(raw, header, body, syntax, partial, &msg)) break;
    pos = body.next;
  }
  return msg;
}

}  // namespace kvault::chat
