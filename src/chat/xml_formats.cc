// Families that write each argument in its own XML-ish element: Qwen3-Coder
// and Seed-OSS (<parameter=P>), GLM 4.5 (<arg_key>/<arg_value>), MiniMax-M2
// and DeepSeek DSML (<invoke name=..><parameter name=..>). String values
// are raw text; other values are JSON (see XmlArgValue).
#include <string>
#include <vector>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;

// Drops the one newline templates put on each side of a value.
std::string_view StripOneNewline(std::string_view v) {
  if (v.starts_with("\n")) v.remove_prefix(1);
  if (v.ends_with("\n")) v.remove_suffix(1);
  return v;
}

// Reads a value that ends at `close` (followed by one of `next`), consuming
// the close tag.
Step ReadValue(Cursor* cur, std::string_view close,
               const std::vector<std::string_view>& next,
               std::string_view* value) {
  size_t end = 0;
  if (Step s = FindValueEnd(*cur, close, next, &end); s != Step::kOk) {
    return s;
  }
  *value = cur->text().substr(cur->pos(), end - cur->pos());
  cur->set_pos(end + close.size());
  return Step::kOk;
}

// <seed:tool_call> or <tool_call> around one <function=..> element.
template <const char* kOpen, const char* kClose>
Step FunctionBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal(kOpen); s != Step::kOk) return s;
  cur->SkipSpace();
  ToolCall call;
  if (Step s = ParseFunctionTag(cur, &call); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral(kClose); s != Step::kOk) return s;
  calls->push_back(std::move(call));
  return Step::kOk;
}

// <tool_call>NAME <arg_key>k</arg_key> <arg_value>v</arg_value> ...
// </tool_call>; a JSON body (Hermes style) is accepted too.
Step GlmBlock(Cursor* cur, bool partial, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("<tool_call>"); s != Step::kOk) return s;
  cur->SkipSpace();
  ToolCall call;
  if (cur->rest().starts_with("{")) {
    if (Step s = ParseJsonCallObject(cur, &call); s != Step::kOk) return s;
  } else {
    std::string_view rest = cur->rest();
    size_t end = rest.find_first_of("\n<");
    if (end == std::string_view::npos) return Step::kNeedMore;
    call.name = std::string(TrimSpace(rest.substr(0, end)));
    if (call.name.empty()) return Step::kFail;
    cur->set_pos(cur->pos() + end);
    Json args = Json::object();
    while (true) {
      Step more = cur->SpaceThenLiteral("<arg_key>");
      if (more == Step::kNeedMore) return more;
      if (more == Step::kFail) break;
      std::string_view key, value;
      if (Step s = cur->Until("</arg_key>", &key); s != Step::kOk) return s;
      cur->set_pos(cur->pos() + 10);
      if (Step s = cur->SpaceThenLiteral("<arg_value>"); s != Step::kOk) {
        return s;
      }
      if (Step s = ReadValue(cur, "</arg_value>", {"<arg_key>", "</tool_call>"},
                             &value);
          s != Step::kOk) {
        return s;
      }
      args[std::string(TrimSpace(key))] = XmlArgValue(value);
      call.raw_arguments.emplace_back(TrimSpace(key), value);
    }
    call.arguments = DumpJson(args);
  }
  if (Step s = cur->SpaceThenLiteral("</tool_call>"); s != Step::kOk) return s;
  calls->push_back(std::move(call));
  return Step::kOk;
}

// The element names of an <invoke> family, `prefix` being "" (MiniMax) or
// "｜DSML｜" (DeepSeek V3.2 / V4).
struct InvokeTags {
  std::string section_open, section_close, invoke_open, invoke_close,
      param_open, param_close;
  explicit InvokeTags(std::string_view section, std::string_view prefix) {
    std::string p(prefix);
    section_open = "<" + std::string(section) + ">";
    section_close = "</" + std::string(section) + ">";
    invoke_open = "<" + p + "invoke name=\"";
    invoke_close = "</" + p + "invoke>";
    param_open = "<" + p + "parameter name=\"";
    param_close = "</" + p + "parameter>";
  }
};

// <parameter name="P"[ string="true|false"]>value</parameter>
Step InvokeParam(Cursor* cur, const InvokeTags& t, Json* args,
                 ToolCall* call) {
  std::string_view name, attrs, value;
  if (Step s = cur->Until("\"", &name); s != Step::kOk) return s;
  cur->set_pos(cur->pos() + 1);
  if (Step s = cur->Until(">", &attrs); s != Step::kOk) return s;
  cur->set_pos(cur->pos() + 1);
  if (Step s =
          ReadValue(cur, t.param_close, {t.param_open, t.invoke_close}, &value);
      s != Step::kOk) {
    return s;
  }
  bool raw_string = attrs.find("string=\"true\"") != std::string_view::npos;
  (*args)[std::string(name)] =
      raw_string ? Json(std::string(value)) : XmlArgValue(value);
  if (!raw_string) call->raw_arguments.emplace_back(name, value);
  return Step::kOk;
}

Step InvokeCall(Cursor* cur, const InvokeTags& t, ToolCall* call) {
  if (Step s = ReadName(cur, "\">", &call->name); s != Step::kOk) return s;
  Json args = Json::object();
  while (true) {
    if (Step s = cur->SpaceThenLiteral(t.invoke_close); s != Step::kFail) {
      if (s == Step::kNeedMore) return s;
      break;
    }
    if (Step s = cur->SpaceThenLiteral(t.param_open); s != Step::kOk) return s;
    if (Step s = InvokeParam(cur, t, &args, call); s != Step::kOk) return s;
  }
  call->arguments = DumpJson(args);
  return Step::kOk;
}

Step InvokeSection(Cursor* cur, const InvokeTags& t,
                   std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal(t.section_open); s != Step::kOk) return s;
  std::vector<ToolCall> found;
  while (true) {
    Step s = cur->SpaceThenLiteral(t.section_close);
    if (s == Step::kOk && !found.empty()) break;
    if (s != Step::kFail) return s == Step::kOk ? Step::kFail : s;
    if (s = cur->SpaceThenLiteral(t.invoke_open); s != Step::kOk) return s;
    ToolCall call;
    if (s = InvokeCall(cur, t, &call); s != Step::kOk) return s;
    found.push_back(std::move(call));
  }
  calls->insert(calls->end(), found.begin(), found.end());
  return Step::kOk;
}

const InvokeTags& MiniMaxTags() {
  static const InvokeTags tags("minimax:tool_call", "");
  return tags;
}
const InvokeTags& DsmlTags() {
  static const InvokeTags tags("｜DSML｜tool_calls", "｜DSML｜");
  return tags;
}

Step MiniMaxBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  return InvokeSection(cur, MiniMaxTags(), calls);
}
Step DsmlBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  return InvokeSection(cur, DsmlTags(), calls);
}

constexpr char kToolCall[] = "<tool_call>";
constexpr char kToolCallEnd[] = "</tool_call>";
constexpr char kSeedCall[] = "<seed:tool_call>";
constexpr char kSeedCallEnd[] = "</seed:tool_call>";

}  // namespace

Step ParseFunctionTag(Cursor* cur, ToolCall* call) {
  if (Step s = cur->Literal("<function="); s != Step::kOk) return s;
  if (Step s = ReadName(cur, ">", &call->name); s != Step::kOk) return s;
  Json args = Json::object();
  while (true) {
    if (Step s = cur->SpaceThenLiteral("</function>"); s != Step::kFail) {
      if (s == Step::kNeedMore) return s;
      break;
    }
    if (Step s = cur->SpaceThenLiteral("<parameter="); s != Step::kOk) {
      return s;
    }
    std::string key;
    std::string_view value;
    if (Step s = ReadName(cur, ">", &key); s != Step::kOk) return s;
    if (Step s = ReadValue(cur, "</parameter>", {"<parameter=", "</function>"},
                           &value);
        s != Step::kOk) {
      return s;
    }
    args[key] = XmlArgValue(StripOneNewline(value));
    call->raw_arguments.emplace_back(key, StripOneNewline(value));
  }
  call->arguments = DumpJson(args);
  return Step::kOk;
}

void ParseQwen3CoderBody(std::string_view body, bool partial,
                         ChatMessage* msg) {
  ScanBlocks(body, {{kToolCall, FunctionBlock<kToolCall, kToolCallEnd>}},
             partial, msg);
}

void ParseSeedOssBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{kSeedCall, FunctionBlock<kSeedCall, kSeedCallEnd>}},
             partial, msg);
}

void ParseGlm45Body(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{kToolCall, GlmBlock}}, partial, msg);
}

void ParseMiniMaxM2Body(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{"<minimax:tool_call>", MiniMaxBlock}}, partial, msg);
}

void ParseDsmlBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{"<｜DSML｜tool_calls>", DsmlBlock}}, partial, msg);
}

}  // namespace kvault::chat
