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
  std::string text = FormatMetrics(SampleMetrics(), SampleMetrics(), 4, 2);
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
  std::string text = FormatMetrics(SampleMetrics(), SampleMetrics(), 1, 0);
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
  std::string text = FormatMetrics(EngineMetrics{}, EngineMetrics{}, 1, 0);
  EXPECT_TRUE(HasLine(text, "llamacpp:prompt_tokens_seconds 0"));
  EXPECT_TRUE(HasLine(text, "llamacpp:kv_cache_usage_ratio 0"));
}

TEST(MetricsTextTest, ThroughputGaugesCoverTheWindowOnly) {
  EngineMetrics before = SampleMetrics();
  EngineMetrics now = before;
  now.tokens_predicted_total += 30;
  now.predicted_seconds_total += 0.5;
  now.forward_calls += 10;
  now.busy_slot_steps += 15;
  const EngineMetrics window = CounterDelta(now, before);
  EXPECT_EQ(window.tokens_predicted_total, 30u);
  EXPECT_EQ(window.prompt_tokens_total, 0u);
  std::string text = FormatMetrics(now, window, 2, 0);
  EXPECT_TRUE(HasLine(text, "llamacpp:tokens_predicted_total 70")) << text;
  EXPECT_TRUE(HasLine(text, "llamacpp:predicted_tokens_seconds 60"));
  EXPECT_TRUE(HasLine(text, "llamacpp:prompt_tokens_seconds 0"));
  EXPECT_TRUE(HasLine(text, "llamacpp:n_busy_slots_per_decode 1.5"));
  // A scrape right after another one reports an empty window.
  text = FormatMetrics(now, CounterDelta(now, now), 2, 0);
  EXPECT_TRUE(HasLine(text, "llamacpp:predicted_tokens_seconds 0"));
}

TEST(MetricsTextTest, LlamaServerSeriesArePresentWithTheirTypes) {
  std::string text = FormatMetrics(SampleMetrics(), EngineMetrics{}, 1, 0);
  for (const char* name :
       {"prompt_tokens_cached_total", "n_tokens_max",
        "spec_decode_num_draft_tokens_total",
        "spec_decode_num_accepted_tokens_total",
        "spec_decode_num_drafts_total"}) {
    EXPECT_TRUE(HasLine(text, std::string("# TYPE llamacpp:") + name +
                                  " counter"))
        << name;
  }
  EXPECT_TRUE(HasLine(text, "# TYPE llamacpp:n_busy_slots_per_decode gauge"));
}

TEST(MetricsTextTest, AddCountersCarriesTotalsAcrossEngines) {
  EngineMetrics base = SampleMetrics();
  base.n_tokens_max = 50;
  EngineMetrics fresh;
  fresh.tokens_predicted_total = 2;
  fresh.n_tokens_max = 7;
  fresh.pool.used_cells = 3;
  AddCounters(base, &fresh);
  EXPECT_EQ(fresh.tokens_predicted_total, 42u);
  EXPECT_DOUBLE_EQ(fresh.prompt_seconds_total, 0.5);
  EXPECT_EQ(fresh.n_tokens_max, 50u);
  EXPECT_EQ(fresh.pool.used_cells, 3u);  // gauges are the new engine's
}

TEST(MetricsTextTest, LabelEscaping) {
  EXPECT_EQ(EscapeLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace kvault
