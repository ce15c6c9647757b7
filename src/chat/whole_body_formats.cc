// Formats whose calls are recognised from the start of the reply rather than
// after a marker: llama-server's generic JSON reply and Llama 3's bare
// {"name":..,"parameters":..} (plus its <|python_tag|> calls).
#include <cctype>
#include <string>
#include <vector>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"
#include "chat/json_healer.h"

namespace kvault::chat {
namespace {

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one escape at s[i] == '\\' into *out; returns the bytes used, or
// 0 when `s` ends before the escape does. Unknown escapes stay verbatim so
// that decoding never fails and a longer prefix never decodes differently.
size_t DecodeEscape(std::string_view s, size_t i, std::string* out) {
  if (i + 1 >= s.size()) return 0;
  static constexpr std::string_view kFrom = "\"\\/bfnrt";
  static constexpr std::string_view kTo = "\"\\/\b\f\n\r\t";
  if (size_t k = kFrom.find(s[i + 1]); k != std::string_view::npos) {
    *out += kTo[k];
    return 2;
  }
  if (s[i + 1] != 'u') return *out += s.substr(i, 2), 2;
  if (i + 6 > s.size()) return 0;
  for (size_t j = i + 2; j < i + 6; ++j) {
    if (!IsHex(s[j])) return *out += s.substr(i, 2), 2;
  }
  uint32_t cp = std::stoul(std::string(s.substr(i + 2, 4)), nullptr, 16);
  if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: needs its pair
    if (i + 12 > s.size()) return 0;
    std::string_view low = s.substr(i + 6, 6);
    if (low.starts_with("\\u") && IsHex(low[2]) && IsHex(low[3]) &&
        IsHex(low[4]) && IsHex(low[5])) {
      uint32_t lo = std::stoul(std::string(low.substr(2)), nullptr, 16);
      if (lo >= 0xDC00 && lo < 0xE000) {
        AppendCodePoint(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), out);
        return 12;
      }
    }
  }
  AppendCodePoint(cp, out);
  return 6;
}

// Decodes the body of a JSON string (after its opening quote) leniently;
// sets *closed and *used when the closing quote is reached.
std::string DecodeStringPrefix(std::string_view s, bool* closed, size_t* used) {
  std::string out;
  *closed = false;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '"') {
      *closed = true;
      *used = i + 1;
      return out;
    }
    if (s[i] != '\\') {
      out += s[i++];
      continue;
    }
    size_t n = DecodeEscape(s, i, &out);
    if (n == 0) break;
    i += n;
  }
  *used = i;
  return out;
}

// Matches `{"response": "` (any spacing); kOk leaves the cursor after it.
Step ResponsePrefix(Cursor* cur) {
  for (std::string_view lit : {"{", "\"response\"", ":", "\""}) {
    if (Step s = cur->SpaceThenLiteral(lit); s != Step::kOk) return s;
  }
  return Step::kOk;
}

// Streams the "response" string as content.
void ParseResponse(Cursor cur, bool partial, ChatMessage* msg) {
  bool closed = false;
  size_t used = 0;
  msg->content += DecodeStringPrefix(cur.rest(), &closed, &used);
  if (!closed) return;
  cur.set_pos(cur.pos() + used);
  if (cur.SpaceThenLiteral("}") == Step::kOk) cur.SkipSpace();
  // Text after the object is not part of the shape; keep it (final only).
  if (!partial) msg->content += TrimLeadingSpace(cur.rest());
}

// The {"tool_call": ..} / {"tool_calls": [..]} object; false when `json`
// has neither shape.
bool GenericCalls(std::string_view json, std::vector<ToolCall>* calls) {
  auto obj = ParseJsonOrDiscard(json);
  if (!obj.is_object()) return false;
  std::vector<std::string_view> args = {"arguments"};
  if (auto one = obj.find("tool_call"); one != obj.end()) {
    ToolCall call;
    if (!CallFromJson(*one, "name", args, &call)) return false;
    calls->push_back(std::move(call));
    return true;
  }
  auto many = obj.find("tool_calls");
  if (many == obj.end() || !many->is_array()) return false;
  for (const auto& item : *many) {
    ToolCall call;
    if (!CallFromJson(item, "name", args, &call)) return false;
    calls->push_back(std::move(call));
  }
  return true;
}

// A Llama 3 JSON call: {"name":..,"parameters":..} (optionally with
// "type":"function"); "arguments" is accepted for the same role.
Step Llama3Call(Cursor* cur, std::vector<ToolCall>* calls) {
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  auto obj = ParseJsonOrDiscard(json);
  ToolCall call;
  // At most name, parameters and type (a healed object's marker key
  // aside).
  size_t num_keys = 0;
  for (auto it = obj.begin(); obj.is_object() && it != obj.end(); ++it) {
    num_keys += HoldsHealMarker(it.key()) ? 0 : 1;
  }
  if (!obj.is_object() || num_keys > 3 ||
      !CallFromJson(obj, "name", {"parameters", "arguments"}, &call)) {
    return Step::kFail;
  }
  calls->push_back(std::move(call));
  return Step::kOk;
}

// One or more Llama 3 JSON calls separated by ';' or whitespace. Stops
// before the first object that is not a call; kOk when at least one was.
Step Llama3Calls(Cursor* cur, bool partial, std::vector<ToolCall>* calls) {
  if (Step s = Llama3Call(cur, calls); s != Step::kOk) return s;
  while (true) {
    size_t after_call = cur->pos();
    cur->SkipSpace();
    if (cur->Literal(";") == Step::kOk) cur->SkipSpace();
    if (cur->AtEnd() && partial) return Step::kNeedMore;  // more may follow
    Cursor next = *cur;
    std::vector<ToolCall> more;
    Step s =
        cur->rest().starts_with("{") ? Llama3Call(&next, &more) : Step::kFail;
    if (s == Step::kNeedMore && partial) return s;
    if (s != Step::kOk) {
      cur->set_pos(after_call);
      return Step::kOk;
    }
    calls->push_back(std::move(more[0]));
    *cur = next;
  }
}

// name.call(key="value", n=1): Llama 3's built-in tool syntax.
Step BuiltinCall(Cursor* cur, ToolCall* call) {
  // The name itself may not hold '.', so find the ".call(" first.
  std::string_view rest = cur->rest();
  size_t dot = rest.find(".call(");
  if (dot == std::string_view::npos) {
    return rest.find_first_of(" \n(") == std::string_view::npos
               ? Step::kNeedMore
               : Step::kFail;
  }
  call->name = std::string(rest.substr(0, dot));
  if (call->name.empty()) return Step::kFail;
  for (char c : call->name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return Step::kFail;
    }
  }
  cur->set_pos(cur->pos() + dot + 6);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (true) {
    if (Step s = cur->SpaceThenLiteral(")"); s != Step::kFail) {
      if (s == Step::kOk) break;
      return s;
    }
    std::string key;
    cur->SkipSpace();
    if (Step s = ReadName(cur, "=", &key); s != Step::kOk) return s;
    std::string value;
    if (Step s = cur->JsonString(&value); s != Step::kOk) return s;
    args[key] = value;
    if (cur->SpaceThenLiteral(",") == Step::kNeedMore) return Step::kNeedMore;
  }
  call->arguments = DumpJson(args);
  return Step::kOk;
}

// <|python_tag|> then JSON calls, a built-in call, or Python code for the
// code interpreter (which runs to the end of the reply).
Step PythonTagBlock(Cursor* cur, bool partial, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("<|python_tag|>"); s != Step::kOk) return s;
  cur->SkipSpace();
  if (cur->AtEnd()) return Step::kNeedMore;
  if (cur->rest().starts_with("{")) {
    Cursor probe = *cur;
    std::vector<ToolCall> found;
    Step s = Llama3Calls(&probe, partial, &found);
    if (s != Step::kFail) {
      if (s == Step::kOk)
        *cur = probe, calls->insert(calls->end(), found.begin(), found.end());
      return s;
    }
  }
  Cursor probe = *cur;
  ToolCall call;
  Step s = BuiltinCall(&probe, &call);
  if (s == Step::kOk) {
    *cur = probe;
    calls->push_back(std::move(call));
    return s;
  }
  if (partial) return Step::kNeedMore;  // code runs to the end of the reply
  nlohmann::ordered_json args = {{"code", std::string(cur->rest())}};
  calls->push_back({"python", DumpJson(args), ""});
  cur->set_pos(cur->text().size());
  return Step::kOk;
}

}  // namespace

void ParseGenericBody(std::string_view body, bool partial, ChatMessage* msg) {
  Cursor cur(body);
  Step prefix = ResponsePrefix(&cur);
  if (prefix == Step::kOk) return ParseResponse(cur, partial, msg);
  if (prefix == Step::kNeedMore && partial) return;
  cur.set_pos(0);
  std::string_view json;
  Step s = cur.JsonContainer(&json);
  if (s == Step::kNeedMore && partial) return;
  std::vector<ToolCall> calls;
  if (s == Step::kOk && GenericCalls(json, &calls)) {
    for (ToolCall& c : calls) msg->tool_calls.push_back(std::move(c));
    cur.SkipSpace();
    msg->content += cur.rest();
    return;
  }
  msg->content += body;  // not the generic shape: the reply is plain text
}

void ParseLlama3Body(std::string_view body, bool partial, ChatMessage* msg) {
  // A bare JSON call counts only at the very start of the reply: later JSON
  // is ordinary text (the model was not calling a tool).
  Cursor cur(body);
  cur.SkipSpace();
  if (cur.rest().starts_with("{")) {
    std::vector<ToolCall> calls;
    const size_t start = cur.pos();
    Step s = Llama3Calls(&cur, partial, &calls);
    if (s == Step::kNeedMore && partial) {
      // What is certain of an unfinished call shows too.
      Cursor healing(body, start);
      healing.EnableHealing();
      std::vector<ToolCall> healed;
      if (Llama3Calls(&healing, false, &healed) == Step::kOk) {
        calls.clear();
        AppendHealedCalls(healing, std::move(healed), &calls);
      }
      if (!calls.empty()) msg->tool_calls = std::move(calls);
      return;
    }
    if (s == Step::kOk) {
      for (ToolCall& c : calls) msg->tool_calls.push_back(std::move(c));
      cur.SkipSpace();
      body = cur.rest();
    }
  }
  ScanBlocks(body, {{"<|python_tag|>", PythonTagBlock}}, partial, msg);
}

}  // namespace kvault::chat
