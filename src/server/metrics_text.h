// GET /metrics: the engine's counters in the Prometheus text exposition
// format (version 0.0.4). Series that llama-server also exports keep its
// names (llamacpp:prompt_tokens_total, ...); kvault's own are prefixed
// kvault_. The list is in docs/http_api.md.
#ifndef KVAULT_SERVER_METRICS_TEXT_H_
#define KVAULT_SERVER_METRICS_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine.h"

namespace kvault {

// Builds one metric family at a time: "# HELP", "# TYPE" and its samples.
class PrometheusWriter {
 public:
  // Starts family `name` of `type` ("counter" or "gauge").
  void Family(std::string_view name, std::string_view type,
              std::string_view help);
  // Adds a sample of the current family; `labels` is "" or
  // `key="value",...` (values escaped with EscapeLabel).
  void Sample(double value, std::string_view labels = "");
  // Returns the text written so far.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string name_;
};

// Returns `value` escaped for a Prometheus label value (\\, \", \n).
std::string EscapeLabel(std::string_view value);

// Returns the counters of `now` less those of `before` (other fields 0):
// what happened between two scrapes.
EngineMetrics CounterDelta(const EngineMetrics& now,
                           const EngineMetrics& before);

// Adds the counters of `base` to `m` (n_tokens_max: the larger), so that
// counters keep growing across an engine reloaded after sleep.
void AddCounters(const EngineMetrics& base, EngineMetrics* m);

// Returns the whole /metrics page for `m`. As llama-server's, the
// throughput gauges cover `window` (CounterDelta since the last scrape);
// `n_slots` and `busy_slots` come from the slot snapshot.
std::string FormatMetrics(const EngineMetrics& m, const EngineMetrics& window,
                          uint32_t n_slots, uint32_t busy_slots);

}  // namespace kvault

#endif  // KVAULT_SERVER_METRICS_TEXT_H_
