#include "server/metrics_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace kvault {
namespace {

// Returns `v` as Prometheus writes numbers: integers without a fraction.
std::string FormatNumber(double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

double Rate(double n, double seconds) { return seconds > 0 ? n / seconds : 0; }

// The counters added across engines and subtracted between scrapes.
constexpr uint64_t EngineMetrics::*kCounters[] = {
    &EngineMetrics::requests_total,
    &EngineMetrics::requests_failed,
    &EngineMetrics::prompt_tokens_total,
    &EngineMetrics::prompt_tokens_cached_total,
    &EngineMetrics::prompt_tokens_shared_total,
    &EngineMetrics::prompt_tokens_from_store_total,
    &EngineMetrics::tokens_predicted_total,
    &EngineMetrics::preemptions,
    &EngineMetrics::preemptions_recomputed,
    &EngineMetrics::idle_kv_discards,
    &EngineMetrics::idle_kv_discarded_tokens,
    &EngineMetrics::kv_full_refusals,
    &EngineMetrics::io_timeouts,
    &EngineMetrics::forward_calls,
    &EngineMetrics::busy_slot_steps,
    &EngineMetrics::restores_ok,
    &EngineMetrics::restores_not_found,
    &EngineMetrics::restores_corrupt,
    &EngineMetrics::restores_mismatch,
    &EngineMetrics::restores_no_room,
    &EngineMetrics::restores_other_error,
    &EngineMetrics::saves_ok,
    &EngineMetrics::saves_failed,
};
constexpr double EngineMetrics::*kSecondCounters[] = {
    &EngineMetrics::prompt_seconds_total,
    &EngineMetrics::predicted_seconds_total,
};

// Cumulative series.
void WriteLlamaCounters(const EngineMetrics& m, PrometheusWriter& w) {
  w.Family("llamacpp:prompt_tokens_total", "counter",
           "Number of prompt tokens processed, excluding cached tokens.");
  w.Sample(m.prompt_tokens_total);
  w.Family("llamacpp:prompt_tokens_cached_total", "counter",
           "Number of prompt tokens reused from the cache.");
  w.Sample(m.prompt_tokens_cached_total);
  w.Family("llamacpp:prompt_seconds_total", "counter", "Prompt process time.");
  w.Sample(m.prompt_seconds_total);
  w.Family("llamacpp:tokens_predicted_total", "counter",
           "Number of generation tokens processed.");
  w.Sample(m.tokens_predicted_total);
  w.Family("llamacpp:tokens_predicted_seconds_total", "counter",
           "Predict process time.");
  w.Sample(m.predicted_seconds_total);
  w.Family("llamacpp:n_decode_total", "counter",
           "Total number of forward calls (batches).");
  w.Sample(m.forward_calls);
  w.Family("llamacpp:n_tokens_max", "counter",
           "Largest observed sequence length (prompt + generation).");
  w.Sample(m.n_tokens_max);
  // kvault does no speculative decoding; the series exist for dashboards.
  for (const char* name : {"llamacpp:spec_decode_num_draft_tokens_total",
                           "llamacpp:spec_decode_num_accepted_tokens_total",
                           "llamacpp:spec_decode_num_drafts_total"}) {
    w.Family(name, "counter", "Speculative decoding (always 0 in kvault).");
    w.Sample(0);
  }
}

// Gauges; the rates are over `window`, the counters since the last scrape.
void WriteLlamaGauges(const EngineMetrics& m, const EngineMetrics& window,
                      PrometheusWriter& w) {
  w.Family("llamacpp:prompt_tokens_seconds", "gauge",
           "Average prompt throughput in tokens/s since the last scrape.");
  w.Sample(Rate(window.prompt_tokens_total, window.prompt_seconds_total));
  w.Family("llamacpp:predicted_tokens_seconds", "gauge",
           "Average generation throughput in tokens/s since the last scrape.");
  w.Sample(Rate(window.tokens_predicted_total, window.predicted_seconds_total));
  w.Family("llamacpp:kv_cache_usage_ratio", "gauge",
           "KV-cache usage. 1 means 100 percent usage.");
  w.Sample(m.pool.num_cells == 0
               ? 0.0
               : double(m.pool.used_cells) / double(m.pool.num_cells));
  w.Family("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.");
  w.Sample(m.pool.used_cells);
  w.Family("llamacpp:requests_processing", "gauge",
           "Number of requests processing.");
  w.Sample(m.requests_processing);
  w.Family("llamacpp:requests_deferred", "gauge",
           "Number of requests deferred (waiting for a slot).");
  w.Sample(m.requests_deferred);
  w.Family("llamacpp:n_busy_slots_per_decode", "gauge",
           "Average number of busy slots per forward call since the last "
           "scrape.");
  w.Sample(Rate(window.busy_slot_steps, window.forward_calls));
}

void WritePoolSeries(const EngineMetrics& m, PrometheusWriter& w) {
  const PoolStats& p = m.pool;
  w.Family("kvault_kv_cells_total", "gauge", "Cells in the shared KV pool.");
  w.Sample(p.num_cells);
  w.Family("kvault_kv_cells_used", "gauge", "Cells holding a token.");
  w.Sample(p.used_cells);
  w.Family("kvault_kv_cells_allocated", "gauge", "Cells in non-free pages.");
  w.Sample(p.allocated_cells);
  w.Family("kvault_kv_cells_free", "gauge", "Cells in free pages.");
  w.Sample(p.free_cells);
  w.Family("kvault_kv_free_runs", "gauge", "Maximal runs of free pages.");
  w.Sample(p.num_free_runs);
  w.Family("kvault_kv_largest_free_run_cells", "gauge",
           "Cells in the largest run of free pages.");
  w.Sample(p.largest_free_run_cells);
  w.Family("kvault_kv_fragmentation_ratio", "gauge",
           "1 - largest free run / free cells.");
  w.Sample(p.fragmentation);
}

// What the on-kv-full policy and the slot I/O deadline did.
void WriteKvLossSeries(const EngineMetrics& m, PrometheusWriter& w) {
  w.Family("kvault_kv_dropped_total", "counter",
           "Idle slots whose KV was dropped for room (--on-kv-full drop-lru).");
  w.Sample(m.idle_kv_discards);
  w.Family("kvault_kv_dropped_tokens_total", "counter",
           "Tokens of KV dropped from idle slots.");
  w.Sample(m.idle_kv_discarded_tokens);
  w.Family("kvault_kv_full_refusals_total", "counter",
           "Requests refused with kv_full (--on-kv-full refuse).");
  w.Sample(m.kv_full_refusals);
  w.Family("kvault_slot_io_timeouts_total", "counter",
           "Slot saves/restores whose file I/O passed --slot-io-timeout.");
  w.Sample(m.io_timeouts);
  w.Family("kvault_slot_io_stuck", "gauge",
           "Timed-out slot file operations still waiting on the filesystem.");
  w.Sample(m.io_stuck);
}

void WriteRequestSeries(const EngineMetrics& m, uint32_t n_slots,
                        uint32_t busy_slots, PrometheusWriter& w) {
  w.Family("kvault_requests_total", "counter",
           "Completion requests and slot actions.");
  w.Sample(m.requests_total);
  w.Family("kvault_requests_failed_total", "counter",
           "Completion requests and slot actions that ended with an error.");
  w.Sample(m.requests_failed);
  w.Family("kvault_tokens_per_second", "gauge",
           "Average throughput in tokens/s by phase.");
  w.Sample(Rate(m.prompt_tokens_total, m.prompt_seconds_total),
           "phase=\"prompt\"");
  w.Sample(Rate(m.tokens_predicted_total, m.predicted_seconds_total),
           "phase=\"predicted\"");
  w.Family("kvault_slots_total", "gauge", "Slots.");
  w.Sample(n_slots);
  w.Family("kvault_slots_busy", "gauge", "Slots processing a request.");
  w.Sample(busy_slots);
  w.Family("kvault_prompt_tokens_shared_total", "counter",
           "Prompt tokens reused from another slot's cache (pages shared "
           "copy-on-write, not recomputed).");
  w.Sample(m.prompt_tokens_shared_total);
  w.Family("kvault_prompt_tokens_from_store_total", "counter",
           "Prompt tokens loaded from the persistent prefix store instead of "
           "recomputed.");
  w.Sample(m.prompt_tokens_from_store_total);
  w.Family("kvault_preemptions_total", "counter",
           "Requests preempted (spilled) because the pool ran out.");
  w.Sample(m.preemptions);
  w.Family("kvault_slot_restores_total", "counter",
           "Slot restores (POST /slots/{id}?action=restore) by result.");
  w.Sample(m.restores_ok, "result=\"ok\"");
  w.Sample(m.restores_not_found, "result=\"not_found\"");
  w.Sample(m.restores_corrupt, "result=\"corrupt\"");
  w.Sample(m.restores_mismatch, "result=\"mismatch\"");
  w.Sample(m.restores_no_room, "result=\"no_room\"");
  w.Sample(m.restores_other_error, "result=\"error\"");
  w.Family("kvault_slot_saves_total", "counter", "Slot saves by result.");
  w.Sample(m.saves_ok, "result=\"ok\"");
  w.Sample(m.saves_failed, "result=\"error\"");
  WriteKvLossSeries(m, w);
}

// The persistent prefix store (--prefix-disk, --kv-store), when there is
// one: each series has one sample per tier, labelled tier="disk"|"redis".
struct PrefixTierSeries {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const PrefixTierStats&);
};
using T = PrefixTierStats;
constexpr PrefixTierSeries kPrefixTierSeries[] = {
    {"kvault_prefix_store_records", "gauge",
     "Page records stored (the local tier's count).",
     [](const T& t) { return double(t.store.num_records); }},
    {"kvault_prefix_store_used_bytes", "gauge", "Bytes they take.",
     [](const T& t) { return double(t.store.used_bytes); }},
    {"kvault_prefix_store_budget_bytes", "gauge",
     "The tier's budget (0: the server's own, e.g. redis maxmemory).",
     [](const T& t) { return double(t.store.budget_bytes); }},
    {"kvault_prefix_store_pages_published_total", "counter",
     "Full pages written (or queued, remote) as records.",
     [](const T& t) { return double(t.pages_published); }},
    {"kvault_prefix_store_publish_failures_total", "counter",
     "Records that could not be written or queued.",
     [](const T& t) { return double(t.publish_failures); }},
    {"kvault_prefix_store_pages_loaded_total", "counter",
     "Pages brought back into the pool instead of recomputed.",
     [](const T& t) { return double(t.pages_loaded); }},
    {"kvault_prefix_store_bad_records_total", "counter",
     "Records refused on reading (damaged, misfiled, another model's) "
     "and removed.",
     [](const T& t) { return double(t.bad_records); }},
    {"kvault_prefix_store_fetches_skipped_total", "counter",
     "Pages held but recomputed: the expected fetch time was longer.",
     [](const T& t) { return double(t.fetches_skipped); }},
    {"kvault_prefix_store_hits_total", "counter",
     "Record reads that found the record.",
     [](const T& t) { return double(t.store.hits); }},
    {"kvault_prefix_store_misses_total", "counter",
     "Record reads that did not (absent, or the store did not answer).",
     [](const T& t) { return double(t.store.misses); }},
    {"kvault_prefix_store_evictions_total", "counter",
     "Records dropped, least recently used first, for the budget.",
     [](const T& t) { return double(t.store.evictions); }},
    {"kvault_prefix_store_foreign_entries_total", "counter",
     "Entries with a record's name that are not records (a directory, a "
     "FIFO): skipped, never read or counted in the budget.",
     [](const T& t) { return double(t.store.foreign_entries); }},
    {"kvault_prefix_store_read_bytes_total", "counter",
     "Record bytes fetched from a remote tier.",
     [](const T& t) { return double(t.store.read_bytes); }},
    {"kvault_prefix_store_read_seconds_total", "counter",
     "Time those fetches took (with read_bytes: the fetch rate).",
     [](const T& t) { return t.store.read_micros / 1e6; }},
    {"kvault_prefix_store_written_bytes_total", "counter",
     "Record bytes written to a remote tier.",
     [](const T& t) { return double(t.store.put_bytes); }},
    {"kvault_prefix_store_queued_bytes", "gauge",
     "Record bytes waiting for the remote tier's writer.",
     [](const T& t) { return double(t.store.queued_bytes); }},
    {"kvault_prefix_store_dropped_writes_total", "counter",
     "Records not written to a remote tier (queue full, store down).",
     [](const T& t) { return double(t.store.dropped_writes); }},
    {"kvault_prefix_store_errors_total", "counter",
     "Remote commands that failed (down, slow, refused).",
     [](const T& t) { return double(t.store.errors); }},
    {"kvault_prefix_store_up", "gauge",
     "1 while the tier answers, 0 while a remote one is backing off.",
     [](const T& t) { return t.store.available ? 1.0 : 0.0; }},
};

void WritePrefixStoreSeries(const PrefixStoreStats& p, PrometheusWriter& w) {
  for (const PrefixTierSeries& s : kPrefixTierSeries) {
    w.Family(s.name, s.type, s.help);
    for (const T& tier : p.tiers) {
      w.Sample(s.value(tier), "tier=\"" + tier.name + "\"");
    }
  }
}

// Named slot files mirrored to the shared store (--kv-store).
void WriteSlotMirrorSeries(const SlotFileMirrorStats& m, PrometheusWriter& w) {
  w.Family("kvault_slot_file_mirror_uploads_total", "counter",
           "Saved slot files copied to the shared store, by result.");
  w.Sample(m.uploads, "result=\"ok\"");
  w.Sample(m.upload_failures, "result=\"error\"");
  w.Family("kvault_slot_file_mirror_fetches_total", "counter",
           "Restores of files missing here, by what the store had.");
  w.Sample(m.fetches, "result=\"ok\"");
  w.Sample(m.fetch_misses, "result=\"not_found\"");
  w.Sample(m.fetch_failures, "result=\"error\"");
}

void WriteVaultSeries(const VaultStats& v, PrometheusWriter& w) {
  w.Family("kvault_vault_evictions_total", "counter",
           "Idle sequences spilled to the tiers to make room.");
  w.Sample(v.evictions);
  w.Family("kvault_vault_restores_total", "counter",
           "Spilled sequences brought back, by result.");
  w.Sample(v.restores_ok, "result=\"ok\"");
  w.Sample(v.restores_failed, "result=\"failed\"");
  struct TierSeries {
    const char* name;
    const char* type;
    const char* help;
    std::function<double(const TierStats&)> get;
  };
  const TierSeries series[] = {
      {"kvault_tier_spills_total", "counter", "Entries stored in the tier.",
       [](const TierStats& t) { return double(t.num_spills); }},
      {"kvault_tier_spilled_bytes_total", "counter", "Bytes stored in it.",
       [](const TierStats& t) { return double(t.spilled_bytes); }},
      {"kvault_tier_used_bytes", "gauge", "Bytes the tier holds now.",
       [](const TierStats& t) { return double(t.used_bytes); }},
      {"kvault_tier_budget_bytes", "gauge", "The tier's budget.",
       [](const TierStats& t) { return double(t.budget_bytes); }},
      {"kvault_tier_entries", "gauge", "Entries the tier holds now.",
       [](const TierStats& t) { return double(t.num_entries); }},
      {"kvault_tier_bring_backs_total", "counter",
       "Entries restored from the tier into the cache.",
       [](const TierStats& t) { return double(t.num_bring_backs); }},
      {"kvault_tier_demotions_total", "counter",
       "Entries moved to the next tier.",
       [](const TierStats& t) { return double(t.num_demotions); }},
      {"kvault_tier_drops_total", "counter",
       "Entries discarded because every tier was over budget.",
       [](const TierStats& t) { return double(t.num_drops); }},
      {"kvault_tier_dropped_bytes_total", "counter", "Bytes discarded.",
       [](const TierStats& t) { return double(t.dropped_bytes); }},
  };
  for (const TierSeries& s : series) {
    w.Family(s.name, s.type, s.help);
    for (const TierStats& t : v.tiers) {
      w.Sample(s.get(t), "tier=\"" + EscapeLabel(t.name) + "\"");
    }
  }
}

}  // namespace

void PrometheusWriter::Family(std::string_view name, std::string_view type,
                              std::string_view help) {
  name_ = std::string(name);
  text_ += "# HELP " + name_ + " " + std::string(help) + "\n";
  text_ += "# TYPE " + name_ + " " + std::string(type) + "\n";
}

void PrometheusWriter::Sample(double value, std::string_view labels) {
  text_ += name_;
  if (!labels.empty()) text_ += "{" + std::string(labels) + "}";
  text_ += " " + FormatNumber(value) + "\n";
}

std::string EscapeLabel(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

EngineMetrics CounterDelta(const EngineMetrics& now,
                           const EngineMetrics& before) {
  EngineMetrics d;
  for (auto field : kCounters) {
    d.*field = now.*field >= before.*field ? now.*field - before.*field : 0;
  }
  for (auto field : kSecondCounters) {
    d.*field = std::max(0.0, now.*field - before.*field);
  }
  return d;
}

void AddCounters(const EngineMetrics& base, EngineMetrics* m) {
  for (auto field : kCounters) m->*field += base.*field;
  for (auto field : kSecondCounters) m->*field += base.*field;
  m->n_tokens_max = std::max(m->n_tokens_max, base.n_tokens_max);
}

std::string FormatMetrics(const EngineMetrics& m, const EngineMetrics& window,
                          uint32_t n_slots, uint32_t busy_slots) {
  PrometheusWriter w;
  WriteLlamaCounters(m, w);
  WriteLlamaGauges(m, window, w);
  WriteRequestSeries(m, n_slots, busy_slots, w);
  WritePoolSeries(m, w);
  WriteVaultSeries(m.vault, w);
  if (m.prefix_store) WritePrefixStoreSeries(*m.prefix_store, w);
  if (m.slot_mirror) WriteSlotMirrorSeries(*m.slot_mirror, w);
  return w.text();
}

}  // namespace kvault
