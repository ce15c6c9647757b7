// The tokenizer.ggml.pre names kvault implements (PreTokenizer), with the
// flags llama.cpp's vocabulary loader sets for each.
#include <string>

#include "model/pre_tokenizer.h"

namespace kvault {
namespace {

struct PreName {
  std::string_view name;
  PreTokenizerInfo info;
};

// llama.cpp's names for the rule sets implemented here, with the flags its
// vocabulary loader sets for each name.
constexpr PreName kPreNames[] = {
    {"default", {PreTokenizerType::kDefault, false, false}},
    {"llama3", {PreTokenizerType::kLlama3, true, true}},
    {"llama-v3", {PreTokenizerType::kLlama3, true, true}},
    {"llama-bpe", {PreTokenizerType::kLlama3, true, true}},
    {"falcon3", {PreTokenizerType::kLlama3, true, true}},
    {"dbrx", {PreTokenizerType::kLlama3, false, false}},
    {"smaug-bpe", {PreTokenizerType::kLlama3, false, false}},
    {"qwen2", {PreTokenizerType::kQwen2, false, false}},
    {"deepseek-r1-qwen", {PreTokenizerType::kQwen2, false, false}},
    {"stablelm2", {PreTokenizerType::kQwen2, false, false}},
    {"megrez", {PreTokenizerType::kQwen2, false, false}},
    {"gpt-2", {PreTokenizerType::kGpt2, false, false}},
    {"gpt2", {PreTokenizerType::kGpt2, false, false}},
    {"phi-2", {PreTokenizerType::kGpt2, false, false}},
    {"mpt", {PreTokenizerType::kGpt2, false, false}},
    {"olmo", {PreTokenizerType::kGpt2, false, false}},
    {"jais", {PreTokenizerType::kGpt2, false, false}},
    {"starcoder", {PreTokenizerType::kStarcoder, false, false}},
    {"refact", {PreTokenizerType::kStarcoder, false, false}},
    {"command-r", {PreTokenizerType::kStarcoder, false, false}},
    {"smollm", {PreTokenizerType::kStarcoder, false, false}},
    {"codeshell", {PreTokenizerType::kStarcoder, false, false}},
    {"deepseek-llm", {PreTokenizerType::kDeepseekLlm, false, false}},
    {"deepseek-coder", {PreTokenizerType::kDeepseekCoder, false, false}},
    {"falcon", {PreTokenizerType::kFalcon, false, false}},
    {"tekken", {PreTokenizerType::kTekken, true, true}},
};

}  // namespace

StatusOr<PreTokenizerInfo> LookupPreTokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const PreName& entry : kPreNames) {
    if (entry.name == name) return entry.info;
  }
  return InvalidArgumentError("unknown pre-tokenizer '" + std::string(name) +
                              "' (tokenizer.ggml.pre); kvault implements "
                              "default, gpt-2, llama3/llama-bpe, qwen2, "
                              "starcoder, refact, mpt, deepseek-llm, "
                              "deepseek-coder, falcon, tekken and their "
                              "aliases");
}

std::string_view PreTokenizerTypeName(PreTokenizerType type) {
  switch (type) {
    case PreTokenizerType::kDefault:
      return "default";
    case PreTokenizerType::kGpt2:
      return "gpt2";
    case PreTokenizerType::kLlama3:
      return "llama3";
    case PreTokenizerType::kQwen2:
      return "qwen2";
    case PreTokenizerType::kStarcoder:
      return "starcoder";
    case PreTokenizerType::kDeepseekLlm:
      return "deepseek-llm";
    case PreTokenizerType::kFalcon:
      return "falcon";
    case PreTokenizerType::kDeepseekCoder:
      return "deepseek-coder";
    case PreTokenizerType::kTekken:
      return "tekken";
  }
  return "?";
}

}  // namespace kvault
