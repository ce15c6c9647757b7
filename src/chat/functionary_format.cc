// Functionary v3.2: the prompt ends with ">>>", and every segment of the
// reply is "RECIPIENT\nBODY" with later segments introduced by ">>>". The
// recipient "all" is text for the user; "python" may carry raw code; any
// other recipient is a function whose body is a JSON object.
#include <cctype>
#include <string>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"

namespace kvault::chat {
namespace {

bool IsRecipient(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  return true;
}

// Handles a text segment (recipient "all", or python code) that runs to the
// next ">>>"; returns where the next segment's recipient starts, or npos.
size_t TextSegment(std::string_view body, size_t start, bool partial,
                   std::string_view* text) {
  size_t next = body.find(">>>", start);
  *text =
      body.substr(start, next == std::string_view::npos ? std::string_view::npos
                                                        : next - start);
  if (next == std::string_view::npos && partial) {
    text->remove_suffix(PartialMarkerSuffix(*text, {">>>"}));
  }
  return next == std::string_view::npos ? next : next + 3;
}

// Handles a function segment; returns where the next recipient starts,
// npos at the end, or `start` when the segment must be held (streaming).
size_t CallSegment(std::string_view body, std::string_view name, size_t start,
                   bool partial, ChatMessage* msg) {
  Cursor cur(body, start);
  std::string_view json;
  Step s = cur.JsonContainer(&json);
  if (s == Step::kNeedMore && partial) return start;
  auto args = ParseJsonOrDiscard(json);
  if (s != Step::kOk || !args.is_object()) {
    if (name == "python") {  // the code interpreter takes raw code
      std::string_view code;
      size_t next = TextSegment(body, start, partial, &code);
      if (next == std::string_view::npos && partial) return start;
      nlohmann::ordered_json a = {{"code", std::string(code)}};
      msg->tool_calls.push_back({"python", DumpJson(a), ""});
      return next;
    }
    std::string_view text;
    size_t next = TextSegment(body, start, partial, &text);
    msg->content += std::string(name) + "\n" + std::string(text);
    return next;
  }
  msg->tool_calls.push_back({std::string(name), DumpJson(args), ""});
  Step more = cur.SpaceThenLiteral(">>>");
  if (more == Step::kOk) return cur.pos();
  if (more == Step::kNeedMore) return std::string_view::npos;
  std::string_view text;  // stray text after the arguments
  size_t next = TextSegment(body, cur.pos(), partial, &text);
  msg->content += text;
  return next;
}

}  // namespace

void ParseFunctionaryV32Body(std::string_view body, bool partial,
                             ChatMessage* msg) {
  size_t pos = body.starts_with(">>>") ? 3 : 0;
  while (pos != std::string_view::npos && pos <= body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (!partial) msg->content += body.substr(pos);
      return;
    }
    std::string_view name = body.substr(pos, nl - pos);
    if (!IsRecipient(name)) {  // not the segment syntax: plain text
      msg->content += body.substr(pos);
      return;
    }
    if (name == "all") {
      std::string_view text;
      pos = TextSegment(body, nl + 1, partial, &text);
      msg->content += text;
      continue;
    }
    size_t next = CallSegment(body, name, nl + 1, partial, msg);
    if (next == nl + 1) return;  // held while streaming
    pos = next;
  }
}

}  // namespace kvault::chat
