// Families whose calls are JSON: Hermes, Mistral, Granite, Apriel,
// Command R and Llama 3.
#include <string>
#include <vector>

#include "chat/block_scanner.h"
#include "chat/format_parsers.h"
#include "chat/json_healer.h"

namespace kvault::chat {
namespace {

const std::vector<std::string_view> kArgsKeys = {"arguments", "parameters"};

// <tool_call> {json} </tool_call>; Qwen3.5-style <function=..> bodies and
// Hermes JSON are both accepted inside, since models of one family emit
// either.
Step HermesBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("<tool_call>"); s != Step::kOk) return s;
  cur->SkipSpace();
  ToolCall call;
  Step s = cur->rest().starts_with("{") ? ParseJsonCallObject(cur, &call)
                                        : ParseFunctionTag(cur, &call);
  if (s != Step::kOk) return s;
  if (s = cur->SpaceThenLiteral("</tool_call>"); s != Step::kOk) return s;
  calls->push_back(std::move(call));
  return Step::kOk;
}

// Nemo: [TOOL_CALLS] [{"name":..,"arguments":..,"id":..}, ...]
// Small 3.2 / Magistral: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
Step MistralBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("[TOOL_CALLS]"); s != Step::kOk) return s;
  cur->SkipSpace();
  if (cur->AtEnd()) return Step::kNeedMore;
  std::string_view json;
  if (cur->rest().starts_with("[")) {
    if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
    return CallsFromJson(json, "name", kArgsKeys, calls) ? Step::kOk
                                                         : Step::kFail;
  }
  ToolCall call;
  if (Step s = ReadName(cur, "[", &call.name); s != Step::kOk) return s;
  Step with_id = cur->Literal("CALL_ID]");
  if (with_id == Step::kNeedMore) return with_id;
  if (with_id == Step::kOk) {
    if (Step s = ReadName(cur, "[ARGS]", &call.id); s != Step::kOk) return s;
  } else if (Step s = cur->Literal("ARGS]"); s != Step::kOk) {
    return s;
  }
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  auto args = ParseJsonOrDiscard(json);
  if (!args.is_object()) return Step::kFail;
  call.arguments = DumpJson(args);
  calls->push_back(std::move(call));
  return Step::kOk;
}

// A start marker followed by a JSON array (or object) of calls.
template <const char* kMarker, const char* kNameKey>
Step JsonListBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal(kMarker); s != Step::kOk) return s;
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  return CallsFromJson(json, kNameKey, kArgsKeys, calls) ? Step::kOk
                                                         : Step::kFail;
}

// A marker that carries no call (Granite's <response> wrapper, Command R's
// response markers): consumed and dropped.
template <const char* kMarker>
Step DropMarker(Cursor* cur, bool, std::vector<ToolCall>*) {
  return cur->Literal(kMarker);
}

// <tool_calls>[{..},{..}]</tool_calls> (Apriel) or one JSON object per line
// (MiniMax-M1).
Step AprielBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("<tool_calls>"); s != Step::kOk) return s;
  std::vector<ToolCall> found;
  while (true) {
    if (Step s = cur->SpaceThenLiteral("</tool_calls>"); s != Step::kFail) {
      if (s == Step::kOk && found.empty()) return Step::kFail;
      if (s == Step::kOk) break;
      return s;
    }
    std::string_view json;
    if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
    if (!CallsFromJson(json, "name", kArgsKeys, &found)) return Step::kFail;
  }
  for (ToolCall& c : found) calls->push_back(std::move(c));
  return Step::kOk;
}

// Command R+: Action: ```json [{"tool_name":..,"parameters":..}] ```
Step CommandRActionBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("Action:"); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral("```json"); s != Step::kOk) return s;
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral("```"); s != Step::kOk) return s;
  return CallsFromJson(json, "tool_name", kArgsKeys, calls) ? Step::kOk
                                                            : Step::kFail;
}

// Command R7B: <|START_ACTION|>[{"tool_call_id":..,"tool_name":..,
// "parameters":..}]<|END_ACTION|>
Step CommandR7bBlock(Cursor* cur, bool, std::vector<ToolCall>* calls) {
  if (Step s = cur->Literal("<|START_ACTION|>"); s != Step::kOk) return s;
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  if (Step s = cur->SpaceThenLiteral("<|END_ACTION|>"); s != Step::kOk) {
    return s;
  }
  auto parsed = ParseJsonOrDiscard(json);
  if (!parsed.is_array() || parsed.empty()) return Step::kFail;
  for (const auto& item : parsed) {
    ToolCall call;
    if (!CallFromJson(item, "tool_name", kArgsKeys, &call)) {
      // A healed list ends with the call being written (or the marker).
      if (HoldsHealMarker(DumpJson(item))) break;
      return Step::kFail;
    }
    auto id = item.find("tool_call_id");
    if (id != item.end() && id->is_string()) call.id = id->get<std::string>();
    calls->push_back(std::move(call));
  }
  return Step::kOk;
}

constexpr char kGraniteCall[] = "<|tool_call|>";
constexpr char kResponseOpen[] = "<response>";
constexpr char kResponseClose[] = "</response>";
constexpr char kStartResponse[] = "<|START_RESPONSE|>";
constexpr char kEndResponse[] = "<|END_RESPONSE|>";
constexpr char kName[] = "name";

}  // namespace

Step ParseJsonCallObject(Cursor* cur, ToolCall* call) {
  std::string_view json;
  if (Step s = cur->JsonContainer(&json); s != Step::kOk) return s;
  auto obj = ParseJsonOrDiscard(json);
  return CallFromJson(obj, "name", kArgsKeys, call) ? Step::kOk : Step::kFail;
}

void ParseHermesBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{"<tool_call>", HermesBlock}}, partial, msg);
}

void ParseMistralBody(std::string_view body, bool partial, ChatMessage* msg) {
  // Nemo's calls carry their id after the arguments.
  ScanBlocks(body, {{"[TOOL_CALLS]", MistralBlock, false}}, partial, msg);
}

void ParseGraniteBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body,
             {{kGraniteCall, JsonListBlock<kGraniteCall, kName>},
              {kResponseOpen, DropMarker<kResponseOpen>},
              {kResponseClose, DropMarker<kResponseClose>}},
             partial, msg);
}

void ParseAprielBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body, {{"<tool_calls>", AprielBlock}}, partial, msg);
}

void ParseCommandRBody(std::string_view body, bool partial, ChatMessage* msg) {
  ScanBlocks(body,
             {{"<|START_ACTION|>", CommandR7bBlock},
              {"Action:", CommandRActionBlock},
              {kStartResponse, DropMarker<kStartResponse>},
              {kEndResponse, DropMarker<kEndResponse>}},
             partial, msg);
}

}  // namespace kvault::chat
