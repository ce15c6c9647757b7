#include "chat/reasoning.h"

#include "chat/scanner.h"

namespace kvault::chat {

ReasoningTags ReasoningTagsFor(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kSeedOss:
      return {"<seed:think>", "</seed:think>"};
    case ToolCallFormat::kCommandR:
      return {"<|START_THINKING|>", "<|END_THINKING|>"};
    case ToolCallFormat::kApriel:
      return {"<thinking>", "</thinking>"};
    case ToolCallFormat::kGptOss:
      return {"", ""};
    default:
      return {"<think>", "</think>"};
  }
}

ReasoningSplit SplitReasoning(std::string_view text, ReasoningTags tags,
                              bool forced_open, bool partial) {
  ReasoningSplit out;
  if (tags.open.empty()) return out;
  std::string_view lead = TrimLeadingSpace(text);
  size_t start = text.size() - lead.size();
  if (partial && IsProperPrefix(lead, tags.open)) {
    out.hold_all = true;  // "<thi" may become "<think>"
    return out;
  }
  bool opens = lead.substr(0, tags.open.size()) == tags.open;
  if (!opens && !forced_open) return out;
  // A forced-open block starts at the very beginning; a model that repeats
  // the opening tag anyway has it skipped.
  size_t inner = opens ? start + tags.open.size() : 0;
  out.has_block = true;
  size_t close = text.find(tags.close, inner);
  if (close != std::string_view::npos) {
    out.closed = true;
    out.reasoning = TrimSpace(text.substr(inner, close - inner));
    out.body_start = close + tags.close.size();
    return out;
  }
  std::string_view rest = text.substr(inner);
  if (partial) rest.remove_suffix(PartialMarkerSuffix(rest, {tags.close}));
  // Unclosed at the end of generation: llama-server reports it as
  // reasoning, so the client still sees the text.
  out.reasoning = TrimSpace(rest);
  out.body_start = text.size();
  return out;
}

}  // namespace kvault::chat
