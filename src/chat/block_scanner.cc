#include "chat/block_scanner.h"

#include <cctype>
#include <optional>

#include "chat/json_healer.h"

namespace kvault::chat {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

// Finds the earliest start marker at or after `pos`.
const BlockKind* NextBlock(std::string_view body, size_t pos,
                           const std::vector<BlockKind>& kinds, size_t* at) {
  const BlockKind* best = nullptr;
  *at = std::string_view::npos;
  for (const BlockKind& k : kinds) {
    size_t found = body.find(k.marker, pos);
    if (found < *at) {
      *at = found;
      best = &k;
    }
  }
  return best;
}

void DropTrailingSpace(std::string* s) {
  s->resize(TrimTrailingSpace(*s).size());
}

// The calls an unfinished block at `at` shows so far (see
// AppendHealedCalls).
void ShowUnfinishedBlock(std::string_view body, size_t at,
                         const BlockKind& kind, ChatMessage* msg) {
  Cursor cur(body, at);
  cur.EnableHealing();
  std::vector<ToolCall> calls;
  // Whatever the block's verdict, the calls it completed before the text
  // ended are certain; only JSON-bodied blocks are shown unfinished.
  kind.parse(&cur, /*partial=*/false, &calls);
  if (cur.read_json()) {
    AppendHealedCalls(cur, std::move(calls), &msg->tool_calls);
  }
}

}  // namespace

size_t AppendHealedCalls(const Cursor& healed, std::vector<ToolCall> calls,
                         std::vector<ToolCall>* shown) {
  size_t num_shown = 0;
  for (ToolCall& call : calls) {
    if (HoldsHealMarker(call.name) || HoldsHealMarker(call.id)) break;
    std::optional<std::string> cut;
    if (healed.healed()) cut = CutAtHeal(call.arguments, healed.heal_cut());
    const bool last = cut.has_value();
    if (last) call.arguments = std::move(*cut);
    shown->push_back(std::move(call));
    ++num_shown;
    if (last) break;
  }
  return num_shown;
}

void ScanBlocks(std::string_view body, const std::vector<BlockKind>& kinds,
                bool partial, ChatMessage* msg) {
  std::vector<std::string_view> markers;
  for (const BlockKind& k : kinds) markers.push_back(k.marker);
  size_t pos = 0;
  while (true) {
    size_t at = 0;
    const BlockKind* kind = NextBlock(body, pos, kinds, &at);
    if (kind == nullptr) {
      std::string_view tail = body.substr(pos);
      if (partial) tail.remove_suffix(PartialMarkerSuffix(tail, markers));
      msg->content += tail;
      return;
    }
    msg->content += body.substr(pos, at - pos);
    Cursor cur(body, at);
    std::vector<ToolCall> calls;
    Step step = kind->parse(&cur, partial, &calls);
    if (step == Step::kOk) {
      DropTrailingSpace(&msg->content);
      for (ToolCall& c : calls) msg->tool_calls.push_back(std::move(c));
      cur.SkipSpace();
      pos = cur.pos();
      continue;
    }
    // An unfinished block may still complete: hold everything from it on,
    // showing what is certain of its calls.
    if (step == Step::kNeedMore && partial) {
      if (kind->shows_unfinished) ShowUnfinishedBlock(body, at, *kind, msg);
      return;
    }
    // Not a call after all: the marker is ordinary text.
    msg->content += kind->marker;
    pos = at + kind->marker.size();
  }
}

bool CallFromJson(const nlohmann::ordered_json& obj, std::string_view name_key,
                  const std::vector<std::string_view>& args_keys,
                  ToolCall* call) {
  if (!obj.is_object()) return false;
  auto name = obj.find(name_key);
  if (name == obj.end() || !name->is_string()) return false;
  call->name = name->get<std::string>();
  if (call->name.empty()) return false;
  call->arguments = "{}";
  bool found_args = false;
  for (std::string_view key : args_keys) {
    auto args = obj.find(key);
    if (args == obj.end()) continue;
    found_args = true;
    if (args->is_string()) {
      auto parsed = ParseJsonOrDiscard(args->get<std::string>());
      if (!parsed.is_object()) return false;
      call->arguments = DumpJson(parsed);
    } else if (args->is_object()) {
      call->arguments = DumpJson(*args);
    } else {
      return false;
    }
    break;
  }
  // A healed object (see json_healer.h) whose arguments have not begun may
  // still be writing their key: "{}" would be a guess.
  if (!found_args && HoldsHealMarker(obj.dump())) return false;
  auto id = obj.find("id");
  if (id != obj.end() && id->is_string()) call->id = id->get<std::string>();
  return true;
}

bool CallsFromJson(std::string_view json, std::string_view name_key,
                   const std::vector<std::string_view>& args_keys,
                   std::vector<ToolCall>* calls) {
  auto parsed = ParseJsonOrDiscard(json);
  if (parsed.is_object()) parsed = nlohmann::ordered_json::array({parsed});
  if (!parsed.is_array() || parsed.empty()) return false;
  for (const auto& item : parsed) {
    ToolCall call;
    if (!CallFromJson(item, name_key, args_keys, &call)) {
      // A healed list ends with the call being written (or the marker).
      return HoldsHealMarker(DumpJson(item)) && !calls->empty();
    }
    calls->push_back(std::move(call));
  }
  return true;
}

nlohmann::ordered_json XmlArgValue(std::string_view raw) {
  std::string_view trimmed = TrimSpace(raw);
  auto parsed = ParseJsonOrDiscard(trimmed);
  if (!parsed.is_discarded() && !parsed.is_string()) return parsed;
  return std::string(raw);
}

Step FindValueEnd(const Cursor& cur, std::string_view close,
                  const std::vector<std::string_view>& next, size_t* end) {
  std::string_view text = cur.text();
  for (size_t at = text.find(close, cur.pos()); at != std::string_view::npos;
       at = text.find(close, at + 1)) {
    std::string_view after = TrimLeadingSpace(text.substr(at + close.size()));
    if (after.empty()) return Step::kNeedMore;
    for (std::string_view n : next) {
      if (after.substr(0, n.size()) == n) {
        *end = at;
        return Step::kOk;
      }
      if (IsProperPrefix(after, n)) return Step::kNeedMore;
    }
  }
  return Step::kNeedMore;
}

Step ReadName(Cursor* cur, std::string_view stop, std::string* name) {
  std::string_view rest = cur->rest();
  size_t i = 0;
  while (i < rest.size() && IsNameChar(rest[i])) ++i;
  std::string_view after = rest.substr(i);
  if (after.substr(0, stop.size()) != stop) {
    return after.empty() || IsProperPrefix(after, stop) ? Step::kNeedMore
                                                        : Step::kFail;
  }
  if (i == 0) return Step::kFail;
  *name = std::string(rest.substr(0, i));
  cur->set_pos(cur->pos() + i + stop.size());
  return Step::kOk;
}

}  // namespace kvault::chat
