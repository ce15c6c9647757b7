#include "chat/format_detect.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kvault::chat {
namespace {

using F = ToolCallFormat;

// The real templates live in ../shared next to the source root; a worktree
// may not have it.
std::filesystem::path TemplateDir() {
  return std::filesystem::path(KVAULT_SOURCE_DIR) / ".." / "shared" /
         "conformance" / "chat-templates";
}

// What each template in the conformance set renders tool calls as. Those
// mapped to kGeneric either ignore tools or use a syntax this module does
// not parse (Gemma 4, LFM2, GigaChat, Kimi K3, Hunyuan, MiniCPM).
const std::map<std::string, F>& Expected() {
  static const std::map<std::string, F> m = {
      {"Bielik-11B-v3.0-Instruct", F::kHermes},
      {"ByteDance-Seed-OSS", F::kSeedOss},
      {"CohereForAI-c4ai-command-r-plus-tool_use", F::kCommandR},
      {"GLM-4.6", F::kGlm45},
      {"GLM-4.7-Flash", F::kGlm45},
      {"GigaChat3-10B-A1.8B", F::kGeneric},
      {"Kimi-K3", F::kGeneric},
      {"LFM2-8B-A1B", F::kGeneric},
      {"LFM2.5-8B-A1B", F::kGeneric},
      {"LFM2.5-Instruct", F::kGeneric},
      {"MiniMax-M1", F::kApriel},
      {"MiniMax-M2", F::kMiniMaxM2},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::kMistral},
      {"Qwen-QwQ-32B", F::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::kHermes},
      {"Qwen3-Coder", F::kQwen3Coder},
      {"Qwen3.5-4B", F::kQwen3Coder},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-V3.1", F::kDeepSeekV31},
      {"deepseek-ai-DeepSeek-V4-Flash-0731", F::kDeepSeekDsml},
      {"deepseek-ai-DeepSeek-V4", F::kDeepSeekDsml},
      {"google-gemma-4-31B-it-interleaved", F::kGeneric},
      {"google-gemma-4-31B-it", F::kGeneric},
      {"ibm-granite-granite-3.3-2B-Instruct", F::kGranite},
      {"llama-cpp-deepseek-r1", F::kDeepSeekR1},
      {"llama-cpp-rwkv-world", F::kGeneric},
      {"meetkai-functionary-medium-v3.2", F::kFunctionaryV32},
      {"meta-llama-Llama-3.1-8B-Instruct", F::kLlama3Json},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::kMistral},
      {"openai-gpt-oss-120b", F::kGptOss},
      {"openbmb-MiniCPM5-1B", F::kGeneric},
      {"poolside-Laguna-XS.2", F::kGlm45},
      {"tencent-Hy3", F::kGeneric},
      {"unsloth-Apriel-1.5", F::kApriel},
  };
  return m;
}

TEST(FormatDetectTest, EachConformanceTemplateGetsItsFormat) {
  if (!std::filesystem::is_directory(TemplateDir())) {
    GTEST_SKIP() << "no " << TemplateDir();
  }
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TemplateDir())) {
    if (entry.path().extension() != ".jinja") continue;
    std::string name = entry.path().stem().string();
    auto want = Expected().find(name);
    ASSERT_NE(want, Expected().end()) << "no expectation for " << name;
    std::ifstream in(entry.path());
    std::stringstream src;
    src << in.rdbuf();
    EXPECT_STREQ(ToolCallFormatName(DetectToolCallFormat(src.str())),
                 ToolCallFormatName(want->second))
        << name;
    ++seen;
  }
  EXPECT_EQ(seen, Expected().size());
}

TEST(FormatDetectTest, SelfContainedMarkers) {
  EXPECT_EQ(DetectToolCallFormat("{{ messages }}"), F::kGeneric);
  EXPECT_EQ(DetectToolCallFormat("{{- '<tool_call>\\n' + tc|tojson }}"),
            F::kHermes);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>{{ n }}<arg_key>"), F::kGlm45);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n<function={{ n }}>"),
            F::kQwen3Coder);
  EXPECT_EQ(DetectToolCallFormat("{{ '[TOOL_CALLS]' }}"), F::kMistral);
  EXPECT_EQ(DetectToolCallFormat("<|START_ACTION|>"), F::kCommandR);
  EXPECT_EQ(DetectToolCallFormat("<|channel|>analysis <tool_call>"),
            F::kGptOss);
  EXPECT_EQ(DetectToolCallFormat("<|tool_calls_section_begin|>"), F::kKimiK2);
  EXPECT_EQ(DetectToolCallFormat("<minimax:tool_call>"), F::kMiniMaxM2);
  EXPECT_EQ(DetectToolCallFormat("<｜tool▁calls▁begin｜>```json"),
            F::kDeepSeekR1);
  EXPECT_EQ(DetectToolCallFormat("<｜tool▁calls▁begin｜>{{ n }}"),
            F::kDeepSeekV31);
}

}  // namespace
}  // namespace kvault::chat
