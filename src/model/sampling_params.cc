#include "model/sampling_params.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>

namespace kvault {
namespace {

struct SamplerNameEntry {
  SamplerType type;
  std::string_view name;  // canonical
  char letter;
};

// llama.cpp's names and letters (common_sampler_type_to_str / _to_chr).
constexpr std::array<SamplerNameEntry, 11> kSamplerNames = {{
    {SamplerType::kDry, "dry", 'd'},
    {SamplerType::kTopK, "top_k", 'k'},
    {SamplerType::kTopP, "top_p", 'p'},
    {SamplerType::kTopNSigma, "top_n_sigma", 's'},
    {SamplerType::kTypicalP, "typ_p", 'y'},
    {SamplerType::kMinP, "min_p", 'm'},
    {SamplerType::kTemperature, "temperature", 't'},
    {SamplerType::kXtc, "xtc", 'x'},
    {SamplerType::kInfill, "infill", 'i'},
    {SamplerType::kPenalties, "penalties", 'e'},
    {SamplerType::kAdaptiveP, "adaptive_p", 'a'},
}};

// The spellings llama.cpp's command line also accepts.
constexpr std::array<std::pair<std::string_view, SamplerType>, 11>
    kAltSamplerNames = {{
        {"top-k", SamplerType::kTopK},
        {"top-p", SamplerType::kTopP},
        {"top-n-sigma", SamplerType::kTopNSigma},
        {"nucleus", SamplerType::kTopP},
        {"typical-p", SamplerType::kTypicalP},
        {"typical", SamplerType::kTypicalP},
        {"typ-p", SamplerType::kTypicalP},
        {"typ", SamplerType::kTypicalP},
        {"min-p", SamplerType::kMinP},
        {"temp", SamplerType::kTemperature},
        {"adaptive-p", SamplerType::kAdaptiveP},
    }};

const SamplerNameEntry& EntryOf(SamplerType type) {
  for (const SamplerNameEntry& e : kSamplerNames) {
    if (e.type == type) return e;
  }
  return kSamplerNames[0];  // unreachable: every type is listed
}

// "%g" keeps small and large values readable (std::to_string prints 1e-9 as
// 0.000000).
std::string Number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return buf;
}

Status OutOfRange(std::string_view field, double value,
                  std::string_view domain) {
  return InvalidArgumentError("field '" + std::string(field) +
                              "': " + Number(value) + " is outside " +
                              std::string(domain))
      .WithReason(kReasonOutOfRange);
}

// Each check is written to accept, so NaN (which fails every comparison)
// is rejected.
Status CheckFinite(std::string_view field, float value) {
  if (std::isfinite(value)) return Status::Ok();
  return OutOfRange(field, value, "the finite numbers");
}

Status CheckUnit(std::string_view field, float value) {
  if (value >= 0 && value <= 1) return Status::Ok();
  return OutOfRange(field, value, "[0, 1]");
}

Status CheckAtLeast(std::string_view field, int64_t value, int64_t low) {
  if (value >= low) return Status::Ok();
  return OutOfRange(field, static_cast<double>(value),
                    "[" + std::to_string(low) + ", 2^31)");
}

Status CheckLogitBias(const std::vector<LogitBias>& biases) {
  for (const LogitBias& b : biases) {
    if (b.token < 0) {
      return OutOfRange("logit_bias", b.token, "the token ids [0, n_vocab)");
    }
    if (std::isnan(b.bias)) {
      return InvalidArgumentError("field 'logit_bias': the bias of token " +
                                  std::to_string(b.token) + " is NaN")
          .WithReason(kReasonOutOfRange);
    }
  }
  return Status::Ok();
}

Status CheckFloats(const SamplingParams& p) {
  const std::pair<std::string_view, float> finite[] = {
      {"temperature", p.temperature},
      {"dynatemp_range", p.dynatemp_range},
      {"dynatemp_exponent", p.dynatemp_exponent},
      {"typical_p", p.typical_p},
      {"top_n_sigma", p.top_n_sigma},
      {"presence_penalty", p.presence_penalty},
      {"frequency_penalty", p.frequency_penalty},
      {"dry_multiplier", p.dry_multiplier},
      {"dry_base", p.dry_base},
      {"mirostat_tau", p.mirostat_tau},
      {"mirostat_eta", p.mirostat_eta},
      {"adaptive_target", p.adaptive_target}};
  for (const auto& [field, value] : finite) {
    KV_RETURN_IF_ERROR(CheckFinite(field, value));
  }
  const std::pair<std::string_view, float> unit[] = {
      {"top_p", p.top_p},
      {"min_p", p.min_p},
      {"xtc_probability", p.xtc_probability},
      {"xtc_threshold", p.xtc_threshold}};
  for (const auto& [field, value] : unit) {
    KV_RETURN_IF_ERROR(CheckUnit(field, value));
  }
  if (!(p.repeat_penalty > 0 && std::isfinite(p.repeat_penalty))) {
    return OutOfRange("repeat_penalty", p.repeat_penalty, "(0, inf)");
  }
  // llama-server's own limit (llama.cpp clamps the sampler's to the same).
  if (!(p.adaptive_decay >= 0 && p.adaptive_decay <= 0.99f)) {
    return OutOfRange("adaptive_decay", p.adaptive_decay, "[0, 0.99]");
  }
  return Status::Ok();
}

}  // namespace

std::string_view SamplerTypeName(SamplerType type) {
  return EntryOf(type).name;
}

char SamplerTypeChar(SamplerType type) { return EntryOf(type).letter; }

std::vector<SamplerType> SamplerTypesFromNames(
    std::span<const std::string> names, bool allow_alt_names,
    std::vector<std::string>* unknown) {
  std::vector<SamplerType> out;
  for (const std::string& name : names) {
    bool found = false;
    for (const SamplerNameEntry& e : kSamplerNames) {
      if (e.name == name) {
        out.push_back(e.type);
        found = true;
        break;
      }
    }
    for (size_t i = 0; !found && allow_alt_names && i < kAltSamplerNames.size();
         ++i) {
      if (kAltSamplerNames[i].first == name) {
        out.push_back(kAltSamplerNames[i].second);
        found = true;
      }
    }
    if (!found && unknown != nullptr) unknown->push_back(name);
  }
  return out;
}

std::vector<SamplerType> SamplerTypesFromChars(std::string_view chars,
                                               std::string* unknown) {
  std::vector<SamplerType> out;
  for (char c : chars) {
    bool found = false;
    for (const SamplerNameEntry& e : kSamplerNames) {
      if (e.letter == c) {
        out.push_back(e.type);
        found = true;
        break;
      }
    }
    if (!found && unknown != nullptr) unknown->push_back(c);
  }
  return out;
}

std::vector<SamplerType> DefaultSamplerOrder() {
  return {SamplerType::kPenalties,  SamplerType::kDry,
          SamplerType::kTopNSigma,  SamplerType::kTopK,
          SamplerType::kTypicalP,   SamplerType::kTopP,
          SamplerType::kMinP,       SamplerType::kXtc,
          SamplerType::kTemperature};
}

SamplingParams SamplingParams::Greedy() {
  SamplingParams params;
  params.temperature = 0;
  return params;
}

void SamplingParams::ResolveContextSize(int32_t n_ctx_slot) {
  if (repeat_last_n == -1) repeat_last_n = n_ctx_slot;
  if (dry_penalty_last_n == -1) dry_penalty_last_n = n_ctx_slot;
}

void SamplingParams::ClampToServerLimits(float default_dry_base) {
  top_k = std::max(top_k, 0);
  top_p = std::clamp(top_p, 0.0f, 1.0f);
  min_p = std::clamp(min_p, 0.0f, 1.0f);
  xtc_probability = std::clamp(xtc_probability, 0.0f, 1.0f);
  xtc_threshold = std::clamp(xtc_threshold, 0.0f, 1.0f);
  temperature = std::max(temperature, 0.0f);
  mirostat = std::clamp(mirostat, 0, 2);
  adaptive_target = std::min(adaptive_target, 1.0f);
  if (dry_base < 1.0f) dry_base = default_dry_base;
}

Status SamplingParams::Validate() const {
  KV_RETURN_IF_ERROR(CheckFloats(*this));
  KV_RETURN_IF_ERROR(CheckAtLeast("repeat_last_n", repeat_last_n, -1));
  KV_RETURN_IF_ERROR(
      CheckAtLeast("dry_penalty_last_n", dry_penalty_last_n, -1));
  KV_RETURN_IF_ERROR(CheckAtLeast("dry_allowed_length", dry_allowed_length, 0));
  KV_RETURN_IF_ERROR(CheckAtLeast("min_keep", min_keep, 0));
  if (mirostat < 0 || mirostat > 2) {
    return OutOfRange("mirostat", mirostat, "{0, 1, 2}");
  }
  return CheckLogitBias(logit_bias);
}

}  // namespace kvault
