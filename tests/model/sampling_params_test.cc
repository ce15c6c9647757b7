#include "model/sampling_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(SamplingParamsTest, DefaultsAreLlamaServers) {
  // llama-server b10573's /props default_generation_settings.
  const SamplingParams p;
  EXPECT_EQ(p.seed, kRandomSeed);
  EXPECT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.dynatemp_range, 0.0f);
  EXPECT_EQ(p.dynatemp_exponent, 1.0f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.typical_p, 1.0f);
  EXPECT_EQ(p.top_n_sigma, -1.0f);
  EXPECT_EQ(p.xtc_probability, 0.0f);
  EXPECT_EQ(p.xtc_threshold, 0.1f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.dry_multiplier, 0.0f);
  EXPECT_EQ(p.dry_base, 1.75f);
  EXPECT_EQ(p.dry_allowed_length, 2);
  EXPECT_EQ(p.dry_penalty_last_n, 64);
  EXPECT_THAT(p.dry_sequence_breakers, ElementsAre("\n", ":", "\"", "*"));
  EXPECT_EQ(p.mirostat, 0);
  EXPECT_EQ(p.mirostat_tau, 5.0f);
  EXPECT_EQ(p.mirostat_eta, 0.1f);
  EXPECT_EQ(p.adaptive_target, -1.0f);
  EXPECT_EQ(p.adaptive_decay, 0.9f);
  EXPECT_EQ(p.min_keep, 0);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_EQ(p.samplers, DefaultSamplerOrder());
  EXPECT_TRUE(p.Validate().ok());
  EXPECT_EQ(SamplingParams::Greedy().temperature, 0.0f);
}

TEST(SamplingParamsTest, DefaultOrderHasLlamaServersNames) {
  std::vector<std::string> names;
  for (SamplerType t : DefaultSamplerOrder()) {
    names.emplace_back(SamplerTypeName(t));
  }
  EXPECT_THAT(names,
              ElementsAre("penalties", "dry", "top_n_sigma", "top_k", "typ_p",
                          "top_p", "min_p", "xtc", "temperature"));
  std::string letters;
  for (SamplerType t : DefaultSamplerOrder()) letters += SamplerTypeChar(t);
  EXPECT_EQ(letters, "edskypmxt");
  EXPECT_EQ(SamplerTypeName(SamplerType::kInfill), "infill");
  EXPECT_EQ(SamplerTypeChar(SamplerType::kAdaptiveP), 'a');
}

TEST(SamplingParamsTest, NamesParseCanonicallyAndUnknownOnesAreSkipped) {
  const std::vector<std::string> names = {"top_k", "nucleus", "temperature",
                                          "bogus", "adaptive_p"};
  std::vector<std::string> unknown;
  EXPECT_THAT(SamplerTypesFromNames(names, false, &unknown),
              ElementsAre(SamplerType::kTopK, SamplerType::kTemperature,
                          SamplerType::kAdaptiveP));
  EXPECT_THAT(unknown, ElementsAre("nucleus", "bogus"));
  // The command line's spellings only with allow_alt_names.
  EXPECT_THAT(SamplerTypesFromNames(names, true),
              ElementsAre(SamplerType::kTopK, SamplerType::kTopP,
                          SamplerType::kTemperature, SamplerType::kAdaptiveP));
  const std::vector<std::string> alt = {"top-k", "typical", "temp", "min-p"};
  EXPECT_THAT(SamplerTypesFromNames(alt, true),
              ElementsAre(SamplerType::kTopK, SamplerType::kTypicalP,
                          SamplerType::kTemperature, SamplerType::kMinP));
}

TEST(SamplingParamsTest, LettersParseAndUnknownOnesAreSkipped) {
  std::string unknown;
  EXPECT_THAT(SamplerTypesFromChars("kqmz t", &unknown),
              ElementsAre(SamplerType::kTopK, SamplerType::kMinP,
                          SamplerType::kTemperature));
  EXPECT_EQ(unknown, "qz ");
  EXPECT_EQ(SamplerTypesFromChars("edskypmxt"), DefaultSamplerOrder());
  EXPECT_THAT(SamplerTypesFromChars("ia"),
              ElementsAre(SamplerType::kInfill, SamplerType::kAdaptiveP));
}

TEST(SamplingParamsTest, SeedUsesTheLow32Bits) {
  SamplingParams p;
  p.seed = 0x1'0000'0005ull;
  EXPECT_EQ(p.seed32(), 5u);
  p.seed = kRandomSeed;
  EXPECT_EQ(p.seed32(), 0xFFFFFFFFu);
}

TEST(SamplingParamsTest, ResolveContextSizeReplacesMinusOne) {
  SamplingParams p;
  p.repeat_last_n = -1;
  p.dry_penalty_last_n = -1;
  p.ResolveContextSize(512);
  EXPECT_EQ(p.repeat_last_n, 512);
  EXPECT_EQ(p.dry_penalty_last_n, 512);
  p.repeat_last_n = 7;
  p.ResolveContextSize(99);
  EXPECT_EQ(p.repeat_last_n, 7);
}

TEST(SamplingParamsTest, ClampToServerLimitsDoesWhatLlamaServerDoes) {
  // Values llama-server b10573 accepts and clamps (seen in its
  // generation_settings): top_p 1.5 -> 1, temperature -1 -> 0, ...
  SamplingParams p;
  p.top_k = -5;
  p.top_p = 1.5f;
  p.min_p = -0.5f;
  p.xtc_probability = 2.0f;
  p.xtc_threshold = 1.5f;
  p.temperature = -1.0f;
  p.mirostat = 3;
  p.adaptive_target = 1.5f;
  p.dry_base = 0.5f;
  p.ClampToServerLimits();
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.xtc_probability, 1.0f);
  EXPECT_EQ(p.xtc_threshold, 1.0f);
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.mirostat, 2);
  EXPECT_EQ(p.adaptive_target, 1.0f);
  EXPECT_EQ(p.dry_base, 1.75f);
  EXPECT_TRUE(p.Validate().ok());
  SamplingParams same;
  same.ClampToServerLimits(3.0f);  // in range: unchanged
  EXPECT_EQ(same.top_p, 0.95f);
  EXPECT_EQ(same.dry_base, 1.75f);
  same.dry_base = 0.0f;
  same.ClampToServerLimits(3.0f);
  EXPECT_EQ(same.dry_base, 3.0f);
}

struct BadCase {
  const char* field;
  void (*set)(SamplingParams*);
  const char* message;  // the whole message
};

TEST(SamplingParamsTest, ValidateNamesFieldValueAndDomain) {
  const std::vector<BadCase> cases = {
      {"temperature", [](SamplingParams* p) { p->temperature = kNaN; },
       "field 'temperature': nan is outside the finite numbers"},
      {"temperature", [](SamplingParams* p) { p->temperature = kInf; },
       "field 'temperature': inf is outside the finite numbers"},
      {"top_p", [](SamplingParams* p) { p->top_p = 1.5f; },
       "field 'top_p': 1.5 is outside [0, 1]"},
      {"min_p", [](SamplingParams* p) { p->min_p = -0.25f; },
       "field 'min_p': -0.25 is outside [0, 1]"},
      {"xtc_probability", [](SamplingParams* p) { p->xtc_probability = 2; },
       "field 'xtc_probability': 2 is outside [0, 1]"},
      {"xtc_threshold", [](SamplingParams* p) { p->xtc_threshold = kNaN; },
       "field 'xtc_threshold': nan is outside [0, 1]"},
      {"repeat_penalty", [](SamplingParams* p) { p->repeat_penalty = 0; },
       "field 'repeat_penalty': 0 is outside (0, inf)"},
      {"frequency_penalty",
       [](SamplingParams* p) { p->frequency_penalty = -kInf; },
       "field 'frequency_penalty': -inf is outside the finite numbers"},
      {"repeat_last_n", [](SamplingParams* p) { p->repeat_last_n = -2; },
       "field 'repeat_last_n': -2 is outside [-1, 2^31)"},
      {"dry_penalty_last_n",
       [](SamplingParams* p) { p->dry_penalty_last_n = -5; },
       "field 'dry_penalty_last_n': -5 is outside [-1, 2^31)"},
      {"dry_allowed_length",
       [](SamplingParams* p) { p->dry_allowed_length = -1; },
       "field 'dry_allowed_length': -1 is outside [0, 2^31)"},
      {"min_keep", [](SamplingParams* p) { p->min_keep = -3; },
       "field 'min_keep': -3 is outside [0, 2^31)"},
      {"mirostat", [](SamplingParams* p) { p->mirostat = 3; },
       "field 'mirostat': 3 is outside {0, 1, 2}"},
      {"adaptive_decay", [](SamplingParams* p) { p->adaptive_decay = 1.0f; },
       "field 'adaptive_decay': 1 is outside [0, 0.99]"},
      {"logit_bias",
       [](SamplingParams* p) {
         p->logit_bias = {{-4, 1.0f}};
       },
       "field 'logit_bias': -4 is outside the token ids [0, n_vocab)"},
      {"logit_bias",
       [](SamplingParams* p) {
         p->logit_bias = {{9, kNaN}};
       },
       "field 'logit_bias': the bias of token 9 is NaN"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.message);
    SamplingParams p;
    c.set(&p);
    const Status s = p.Validate();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.reason(), "out_of_range");
    EXPECT_EQ(s.message(), c.message);
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.field + "'"));
  }
}

TEST(SamplingParamsTest, ValidateAcceptsLlamaCppsOffValuesAndEdges) {
  SamplingParams p;
  p.temperature = -2.0f;  // <= 0: the most likely token
  p.top_k = -1;           // <= 0: off
  p.top_p = 0.0f;
  p.min_p = 1.0f;
  p.typical_p = 3.0f;  // >= 1: off (llama-server sets no limit)
  p.top_n_sigma = -1.0f;
  p.xtc_threshold = 1.0f;  // > 0.5: off
  p.repeat_last_n = -1;    // the context size
  p.dry_penalty_last_n = -1;
  p.dry_base = 0.5f;  // < 1: DRY off
  p.mirostat = 2;
  p.adaptive_decay = 0.99f;
  p.adaptive_target = -5.0f;
  p.logit_bias = {{3, -kInf}, {4, kInf}};
  EXPECT_TRUE(p.Validate().ok()) << p.Validate();
}

}  // namespace
}  // namespace kvault
