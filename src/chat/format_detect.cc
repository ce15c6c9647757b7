#include "chat/format_detect.h"

#include <array>
#include <string>
#include <utility>

namespace kvault::chat {
namespace {

using F = ToolCallFormat;

constexpr std::array<std::pair<F, const char*>, 18> kNames = {{
    {F::kContentOnly, "content-only"},
    {F::kGeneric, "generic"},
    {F::kHermes, "hermes"},
    {F::kQwen3Coder, "qwen3-coder"},
    {F::kLlama3Json, "llama3-json"},
    {F::kMistral, "mistral"},
    {F::kDeepSeekR1, "deepseek-r1"},
    {F::kDeepSeekV31, "deepseek-v3.1"},
    {F::kCommandR, "command-r"},
    {F::kGptOss, "gpt-oss"},
    {F::kGlm45, "glm-4.5"},
    {F::kKimiK2, "kimi-k2"},
    {F::kMiniMaxM2, "minimax-m2"},
    {F::kGranite, "granite"},
    {F::kFunctionaryV32, "functionary-v3.2"},
    {F::kSeedOss, "seed-oss"},
    {F::kDeepSeekDsml, "deepseek-dsml"},
    {F::kApriel, "apriel"},
}};

bool Has(std::string_view src, std::string_view needle) {
  return src.find(needle) != std::string_view::npos;
}

// Formats with a marker no other family uses; checked first because their
// templates also mention generic words like <tool_call> in prose.
F DetectDistinctive(std::string_view src) {
  if (Has(src, "<|channel|>")) return F::kGptOss;
  if (Has(src, ">>>all")) return F::kFunctionaryV32;
  if (Has(src, "<|tool_calls_section_begin|>")) return F::kKimiK2;
  if (Has(src, "<minimax:tool_call>")) return F::kMiniMaxM2;
  if (Has(src, "<seed:tool_call>")) return F::kSeedOss;
  if (Has(src, "｜DSML｜")) return F::kDeepSeekDsml;
  if (Has(src, "<｜tool▁calls▁begin｜>")) {
    // R1 wraps the arguments in a ```json fence after "function<sep>NAME";
    // V3.1 puts the name first and the bare JSON after the separator.
    return Has(src, "```json") ? F::kDeepSeekR1 : F::kDeepSeekV31;
  }
  return F::kContentOnly;  // "none yet"
}

}  // namespace

const char* ToolCallFormatName(ToolCallFormat f) {
  for (const auto& [format, name] : kNames) {
    if (format == f) return name;
  }
  return "unknown";
}

StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  std::string known;
  for (const auto& [format, n] : kNames) {
    if (name == n) return format;
    known += known.empty() ? "" : ", ";
    known += n;
  }
  return InvalidArgumentError("unknown tool-call format '" + std::string(name) +
                              "' (known: " + known + ")");
}

StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepSeek;
  if (name == "deepseek-legacy") return ReasoningFormat::kDeepSeekLegacy;
  if (name == "auto") return ReasoningFormat::kAuto;
  return InvalidArgumentError("unknown reasoning format '" + std::string(name) +
                              "' (allowed: none, deepseek, deepseek-legacy, "
                              "auto)");
}

ToolCallFormat DetectToolCallFormat(std::string_view src) {
  if (F f = DetectDistinctive(src); f != F::kContentOnly) return f;
  // The XML-argument families share <tool_call>; their argument tags tell
  // them apart from Hermes' JSON body.
  if (Has(src, "<tool_call>") && Has(src, "<arg_key>")) return F::kGlm45;
  if (Has(src, "<tool_call>") && Has(src, "<function=")) return F::kQwen3Coder;
  if (Has(src, "<tool_calls>")) return F::kApriel;
  if (Has(src, "<tool_call>")) return F::kHermes;
  if (Has(src, "<|tool_call|>")) return F::kGranite;
  if (Has(src, "<|START_ACTION|>") ||
      (Has(src, "Action:") && Has(src, "tool_name"))) {
    return F::kCommandR;
  }
  if (Has(src, "[TOOL_CALLS]")) return F::kMistral;
  if (Has(src, "<|start_header_id|>ipython<|end_header_id|>") ||
      Has(src, "<|python_tag|>")) {
    return F::kLlama3Json;
  }
  return F::kGeneric;
}

}  // namespace kvault::chat
