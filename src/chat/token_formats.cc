// Families framed by special tokens: DeepSeek R1 and V3.1, Kimi K2; and
// Functionary v3.2's ">>>recipient" segments.
#include <string>
#include <vector>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"

namespace kvault::chat {
namespace {

constexpr char kDsCallsBegin[] = "<｜tool▁calls▁begin｜>";
constexpr char kDsCallsEnd[] = "<｜tool▁calls▁end｜>";
constexpr char kDsCallBegin[] = "<｜tool▁call▁begin｜>";
constexpr char kDsCallEnd[] = "<｜tool▁call▁end｜>";
constexpr char kDsSep[] = "<｜tool▁sep｜>";
constexpr char kKimiSectionBegin[] = "<|tool_calls_section_begin|>";
constexpr char kKimiSectionEnd[] = "<|tool_calls_section_end|>";
constexpr char kKimiCallBegin[] = "<|tool_call_begin|>";

using CallParser = Step (*)(Cursor*, ToolCall*);

// Reads JSON object arguments into call->arguments.
Step ReadArgs(Cursor* cur, ToolCall* call) {
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  auto args = ParseJsonOrDiscard(json);
  if (!args.is_object()) return Step::kFail;
  call->arguments = DumpJson(args);
  return Step::kOk;
}

// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```
// <｜tool▁call▁end｜>
Step R1Call(Cursor* cur, ToolCall* call) {
  if (Step s = cur->Literal(kDsCallBegin); s != Step::kOk) return s;
  if (Step s = cur->Literal("function"); s != Step::kOk) return s;
  if (Step s = cur->Literal(kDsSep); s != Step::kOk) return s;
  if (Step s = ReadName(cur, "\n", &call->name); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral("```json"); s != Step::kOk) return s;
  if (Step s = ReadArgs(cur, call); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral("```"); s != Step::kOk) return s;
  return cur->SpaceThenLiteral(kDsCallEnd);
}

// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>
Step V31Call(Cursor* cur, ToolCall* call) {
  if (Step s = cur->Literal(kDsCallBegin); s != Step::kOk) return s;
  if (Step s = ReadName(cur, kDsSep, &call->name); s != Step::kOk) return s;
  if (Step s = ReadArgs(cur, call); s != Step::kOk) return s;
  return cur->SpaceThenLiteral(kDsCallEnd);
}

// <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}
// <|tool_call_end|>; the whole "functions.NAME:IDX" is the call id.
Step KimiCall(Cursor* cur, ToolCall* call) {
  if (Step s = cur->Literal(kKimiCallBegin); s != Step::kOk) return s;
  std::string id;
  if (Step s = ReadName(cur, "<|tool_call_argument_begin|>", &id);
      s != Step::kOk) {
    return s;
  }
  std::string_view name = id;
  if (name.starts_with("functions.")) name.remove_prefix(10);
  if (size_t colon = name.rfind(':'); colon != std::string_view::npos) {
    name = name.substr(0, colon);
  }
  if (name.empty()) return Step::kFail;
  call->name = std::string(name);
  call->id = id;
  if (Step s = ReadArgs(cur, call); s != Step::kOk) return s;
  return cur->SpaceThenLiteral("<|tool_call_end|>");
}

// `open`, one or more calls, `close`. A reply that stops after its last
// call without `close` still counts once generation is over.
Step Section(Cursor* cur, bool partial, std::string_view open,
             std::string_view close, CallParser parse_call,
             std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal(open); s != Step::kOk) return s;
  std::vector<ToolCall> found;
  while (true) {
    Step s = cur->SpaceThenLiteral(close);
    if (s == Step::kOk && !found.empty()) break;
    if (s == Step::kNeedMore && !partial && !found.empty()) break;
    if (s != Step::kFail) return s == Step::kOk ? Step::kFail : s;
    cur->SkipSpace();
    ToolCall call;
    if (s = parse_call(cur, &call); s != Step::kOk) {
      // The calls before an unfinished one are whole: a stream shows
      // them (ScanBlocks reads `calls` after kNeedMore only then).
      if (s == Step::kNeedMore) calls->insert(calls->end(), found.begin(), found.end());
      return s;
    }
    found.push_back(std::move(call));
  }
  calls->insert(calls->end(), found.begin(), found.end());
  return Step::kOk;
}

template <CallParser kParse>
Step DsSection(Cursor* cur, bool partial, std::vector<ToolCall>* calls) {
  return Section(cur, partial, kDsCallsBegin, kDsCallsEnd, kParse, calls);
}

// A lone call outside a section (some distills drop the section tokens).
template <CallParser kParse>
Step LoneCall(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  ToolCall call;
  if (Step s = kParse(cur, &call); s != Step::kOk) return s;
  calls->push_back(std::move(call));
  return Step::kOk;
}

Step KimiSection(Cursor* cur, bool partial, std::vector<ToolCall>* calls) {
  return Section(cur, partial, kKimiSectionBegin, kKimiSectionEnd, KimiCall,
                 calls);
}

}  // namespace

void ParseDeepSeekR1Body(std::string_view body, bool partial,
                         ChatMessage* msg) {
  ScanBlocks(
      body,
      {{kDsCallsBegin, DsSection<R1Call>}, {kDsCallBegin, LoneCall<R1Call>}},
      partial, msg);
}

void ParseDeepSeekV31Body(std::string_view body, bool partial,
                          ChatMessage* msg) {
  ScanBlocks(
      body,
      {{kDsCallsBegin, DsSection<V31Call>}, {kDsCallBegin, LoneCall<V31Call>}},
      partial, msg);
}

void ParseKimiK2Body(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{kKimiSectionBegin, KimiSection}}, partial, msg);
}

}  // namespace kvault::chat
