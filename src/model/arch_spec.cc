#include "model/arch_spec.h"

#include <string>
#include <utility>

namespace kvault {
namespace {

// Every row is checked against llama.cpp by tests/model/arch_golden_test
// (../shared/models/arch).
constexpr ArchSpec kArchSpecs[] = {
    {.name = "llama",
     .rope_style = RopeStyle::kNormal,
     .rope_freq_factors = true,
     .moe = MoeSupport::kOptional},
    {.name = "qwen2", .rope_style = RopeStyle::kNeox, .qkv_bias = true},
    {.name = "qwen3", .rope_style = RopeStyle::kNeox, .qk_norm = true},
    {.name = "qwen3moe",
     .rope_style = RopeStyle::kNeox,
     .qk_norm = true,
     .moe = MoeSupport::kRequired,
     .expert_ff_length = true},
    {.name = "phi3",
     .rope_style = RopeStyle::kNeox,
     .tied_output_allowed = false,
     .fused_qkv = true,
     .fused_gate_up = true,
     .scale_q = true},
    {.name = "gemma2",
     .rope_style = RopeStyle::kNeox,
     .scale_q = true,
     .embed_scale = true,
     .gelu_ffn = true,
     .post_norms = true,
     .softcap = true,
     .swa_pattern = 2},
    // gemma3: five local layers, then a global one, unless
    // attention.sliding_window_pattern says otherwise.
    {.name = "gemma3",
     .rope_style = RopeStyle::kNeox,
     .qk_norm = true,
     .scale_q = true,
     .embed_scale = true,
     .gelu_ffn = true,
     .post_norms = true,
     .swa_pattern = 6,
     .swa_rope_freq_base = 10000.0f},
};

}  // namespace

std::span<const ArchSpec> AllArchSpecs() { return kArchSpecs; }

std::vector<std::string> ArchFeatureNames(const ArchSpec& spec) {
  const std::pair<bool, const char*> flags[] = {
      {spec.rope_style == RopeStyle::kNeox, "neox rope"},
      {spec.qkv_bias, "qkv bias"},
      {spec.qk_norm, "q/k norm"},
      {spec.fused_qkv, "fused qkv"},
      {spec.fused_gate_up, "fused gate/up"},
      {spec.scale_q, "q pre-scaled"},
      {spec.embed_scale, "scaled embeddings"},
      {spec.gelu_ffn, "gelu ffn"},
      {spec.post_norms, "post norms"},
      {spec.softcap, "logit soft-capping"},
      {spec.swa_pattern > 0, "sliding-window layers"},
      {spec.swa_rope_freq_base > 0.0f, "local rope base"},
  };
  std::vector<std::string> names;
  for (const auto& [on, name] : flags) {
    if (on) names.emplace_back(name);
  }
  return names;
}

StatusOr<ArchSpec> FindArchSpec(std::string_view name) {
  std::string known;
  for (const ArchSpec& spec : kArchSpecs) {
    if (spec.name == name) return spec;
    known += known.empty() ? "" : ", ";
    known += spec.name;
  }
  return UnimplementedError("architecture '" + std::string(name) +
                            "' is not supported (supported: " + known + ")");
}

}  // namespace kvault
