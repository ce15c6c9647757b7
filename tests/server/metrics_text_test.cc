#include "server/metrics_text.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

EngineMetrics SampleMetrics() {
  EngineMetrics m;
  m.requests_total = 9;
  m.requests_failed = 1;
  m.requests_processing = 2;
  m.requests_deferred = 3;
  m.prompt_tokens_total = 100;
  m.prompt_seconds_total = 0.5;
  m.tokens_predicted_total = 40;
  m.predicted_seconds_total = 2.0;
  m.forward_calls = 17;
  m.pool.num_cells = 1024;
  m.pool.used_cells = 256;
  m.pool.allocated_cells = 272;
  m.pool.free_cells = 752;
  m.pool.fragmentation = 0.25;
  m.restores_ok = 4;
  m.restores_corrupt = 2;
  m.restores_no_room = 1;
  m.saves_ok = 5;
  TierStats ram;
  ram.name = "ram";
  ram.num_spills = 6;
  ram.spilled_bytes = 123456789;
  TierStats disk;
  disk.name = "disk";
  disk.used_bytes = 42;
  m.vault.tiers = {ram, disk};
  m.vault.evictions = 6;
  return m;
}

bool HasLine(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos ||
         text.rfind(line + "\n", 0) == 0;
}

TEST(MetricsTextTest, ContainsTheExpectedSeries) {
  std::string text = FormatMetrics(SampleMetrics(), 4, 2);
  const char* lines[] = {
      "llamacpp:prompt_tokens_total 100",
      "llamacpp:prompt_seconds_total 0.5",
      "llamacpp:tokens_predicted_total 40",
      "llamacpp:tokens_predicted_seconds_total 2",
      "llamacpp:n_decode_total 17",
      "llamacpp:prompt_tokens_seconds 200",
      "llamacpp:predicted_tokens_seconds 20",
      "llamacpp:kv_cache_usage_ratio 0.25",
      "llamacpp:kv_cache_tokens 256",
      "llamacpp:requests_processing 2",
      "llamacpp:requests_deferred 3",
      "kvault_requests_total 9",
      "kvault_requests_failed_total 1",
      "kvault_tokens_per_second{phase=\"prompt\"} 200",
      "kvault_tokens_per_second{phase=\"predicted\"} 20",
      "kvault_slots_total 4",
      "kvault_slots_busy 2",
      "kvault_kv_cells_total 1024",
      "kvault_kv_cells_used 256",
      "kvault_kv_fragmentation_ratio 0.25",
      "kvault_slot_restores_total{result=\"ok\"} 4",
      "kvault_slot_restores_total{result=\"corrupt\"} 2",
      "kvault_slot_restores_total{result=\"no_room\"} 1",
      "kvault_slot_restores_total{result=\"not_found\"} 0",
      "kvault_slot_saves_total{result=\"ok\"} 5",
      "kvault_vault_evictions_total 6",
      "kvault_tier_spills_total{tier=\"ram\"} 6",
      "kvault_tier_spilled_bytes_total{tier=\"ram\"} 123456789",
      "kvault_tier_used_bytes{tier=\"disk\"} 42",
      "# TYPE llamacpp:prompt_tokens_total counter",
      "# TYPE kvault_kv_cells_used gauge",
  };
  for (const char* line : lines) {
    EXPECT_TRUE(HasLine(text, line)) << line << "\n--- in ---\n" << text;
  }
}

TEST(MetricsTextTest, EveryFamilyHasHelpAndTypeOnce) {
  std::string text = FormatMetrics(SampleMetrics(), 1, 0);
  size_t helps = 0, types = 0, pos = 0;
  while ((pos = text.find("# HELP ", pos)) != std::string::npos) {
    ++helps;
    ++pos;
  }
  pos = 0;
  while ((pos = text.find("# TYPE ", pos)) != std::string::npos) {
    ++types;
    ++pos;
  }
  EXPECT_EQ(helps, types);
  EXPECT_GT(helps, 30u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsTextTest, ZeroDurationsGiveZeroRates) {
  std::string text = FormatMetrics(EngineMetrics{}, 1, 0);
  EXPECT_TRUE(HasLine(text, "llamacpp:prompt_tokens_seconds 0"));
  EXPECT_TRUE(HasLine(text, "llamacpp:kv_cache_usage_ratio 0"));
}

TEST(MetricsTextTest, LabelEscaping) {
  EXPECT_EQ(EscapeLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace kvault
