// kvault's extensions: GET /kv (pool statistics and the page -> slot map),
// POST /kv/defrag, and GET|POST /kv/lookup (how much of a prompt this
// instance holds, for cache-aware routers).
#include <charconv>
#include <chrono>

#include "server/action_wait.h"
#include "server/completion_codec.h"
#include "server/json_fields.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using Request = HttpRequest;
using Response = HttpResponse;
using nlohmann::json;

json PoolJson(const PoolStats& p) {
  return json{{"num_cells", p.num_cells},
              {"used_cells", p.used_cells},
              {"allocated_cells", p.allocated_cells},
              {"free_cells", p.free_cells},
              {"num_free_runs", p.num_free_runs},
              {"largest_free_run_cells", p.largest_free_run_cells},
              {"fragmentation", p.fragmentation}};
}

// Returns one character per page: '.' free, '0'-'9' then 'a'-'z' then
// 'A'-'Z' for slots 0-61, '#' for higher slots.
std::string MapText(const KvMap& map) {
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string text;
  text.reserve(map.page_slot.size());
  for (const std::optional<uint32_t>& slot : map.page_slot) {
    if (!slot.has_value()) {
      text += '.';
    } else {
      text += *slot < sizeof(kDigits) - 1 ? kDigits[*slot] : '#';
    }
  }
  return text;
}

// The spill tiers (RAM, disk) and the prefix store's (disk, redis), nearest
// first, each with its occupancy: the web UI's tier bars.
json TiersJson(const EngineMetrics& m) {
  json tiers = json::array();
  for (const TierStats& t : m.vault.tiers) {
    tiers.push_back({{"name", t.name},
                     {"kind", "spill"},
                     {"used_bytes", t.used_bytes},
                     {"budget_bytes", t.budget_bytes},
                     {"num_entries", t.num_entries}});
  }
  if (m.prefix_store.has_value()) {
    for (const PrefixTierStats& t : m.prefix_store->tiers) {
      tiers.push_back({{"name", t.name},
                       {"kind", "prefix"},
                       {"used_bytes", t.store.used_bytes},
                       {"budget_bytes", t.store.budget_bytes},
                       {"num_entries", t.store.num_records}});
    }
  }
  return tiers;
}

json LastEventJson(ServerState& state) {
  KvEvent e;
  {
    MutexLock lock(&state.events_mu);
    e = state.last_kv_event;  // a copy: the analysis cannot follow a reference
  }
  if (e.seq == 0) return nullptr;
  return json{{"seq", e.seq},
              {"action", e.action},
              {"id_slot", e.slot ? json(*e.slot) : json(nullptr)},
              {"unix_ms", e.unix_ms}};
}

// The fields before "tiers" are /kv's original answer, unchanged; the
// rest were added for the web UI's KV map.
json KvMapJson(ServerState& state, const Engine& engine) {
  const KvMap map = engine.GetKvMap();
  json pages = json::array();
  for (const std::optional<uint32_t>& slot : map.page_slot) {
    pages.push_back(slot.has_value() ? json(*slot) : json(nullptr));
  }
  json shared = json::array();
  for (size_t i = 0; i < map.page_shared.size(); ++i) {
    if (map.page_shared[i]) shared.push_back(i);
  }
  return json{{"pool", PoolJson(map.stats)},
              {"page_size", map.page_size},
              {"num_pages", map.page_slot.size()},
              {"page_slot", std::move(pages)},
              {"map", MapText(map)},
              {"shared_pages", std::move(shared)},
              {"tiers", TiersJson(engine.Metrics())},
              {"last_event", LastEventJson(state)}};
}

// Parses "1,2,3" into token ids; InvalidArgument naming the bad item.
StatusOr<std::vector<TokenId>> ParseTokenList(std::string_view text) {
  std::vector<TokenId> ids;
  size_t index = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    TokenId id = 0;
    auto [end, ec] =
        std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      return InvalidArgumentError("query parameter 'tokens': item " +
                                  std::to_string(index) + " ('" +
                                  std::string(item) +
                                  "') is not a token id; expected e.g. "
                                  "tokens=1,2,3");
    }
    ids.push_back(id);
    ++index;
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  }
  return ids;
}

// The prompt of a lookup: GET ?tokens=1,2,3 or ?prompt=TEXT, or a POST body
// {"tokens": [...]} or {"prompt": "text" | [ids and strings]}.
StatusOr<std::vector<TokenId>> LookupTokens(const Request& req,
                                            const Tokenizer& tokenizer) {
  json prompt;
  if (req.method == "POST") {
    KV_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
    const json* p = FindField(body, "tokens");
    if (p == nullptr) p = FindField(body, "prompt");
    if (p == nullptr) {
      return InvalidArgumentError("missing field 'tokens' (or 'prompt')");
    }
    prompt = *p;
  } else if (!req.Param("tokens").empty()) {
    return ParseTokenList(req.Param("tokens"));
  } else if (!req.Param("prompt").empty()) {
    prompt = req.Param("prompt");
  } else {
    return InvalidArgumentError(
        "missing query parameter 'tokens' (e.g. tokens=1,2,3) or 'prompt'");
  }
  return TokenizePrompt(prompt, tokenizer, /*add_special=*/true, "prompt");
}

json LookupJson(const PrefixLookup& l) {
  uint64_t best = l.pool_tokens;
  json store = json::array();
  for (const auto& [tier, n] : l.store_tokens) {
    store.push_back({{"tier", tier}, {"n_tokens", n}});
    best = std::max(best, n);
  }
  return json{{"n_tokens", l.num_tokens},
              {"n_tokens_held", best},
              {"pool",
               {{"n_tokens", l.pool_tokens},
                {"id_slot", l.pool_slot ? json(*l.pool_slot) : json(nullptr)}}},
              {"store", std::move(store)}};
}

void HandleLookup(ServerState& state, const Request& req, Response& res) {
  Engine* engine = state.engine.load();
  StatusOr<std::vector<TokenId>> tokens =
      LookupTokens(req, engine->model().tokenizer());
  if (!tokens.ok()) return ReplyStatus(res, tokens.status());
  StatusOr<PrefixLookup> r =
      AwaitAction<PrefixLookup>(req, [&](Reply<PrefixLookup> reply) {
        return engine->StartLookup(std::move(*tokens), reply);
      });
  if (!r.ok()) return ReplyStatus(res, r.status());
  ReplyJson(res, LookupJson(*r));
}

}  // namespace

void RecordKvEvent(ServerState& state, const std::string& action,
                   std::optional<uint32_t> slot) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  MutexLock lock(&state.events_mu);
  state.last_kv_event =
      KvEvent{state.last_kv_event.seq + 1, action, slot, unix_ms};
}

void RegisterKvRoutes(HttpRouter& server, ServerState& state) {
  server.Get("/kv/lookup", [&state](const Request& req, Response& res) {
    HandleLookup(state, req, res);
  });
  RegisterPost(server, "/kv/lookup", state,
               [&state](const Request& req, Response& res) {
                 HandleLookup(state, req, res);
               });
  server.Get("/kv", [&state](const Request&, Response& res) {
    ReplyJson(res, KvMapJson(state, *state.engine.load()));
  });
  RegisterPost(
      server, "/kv/defrag", state, [&state](const Request& req, Response& res) {
        Engine* engine = state.engine.load();
        StatusOr<DefragReport> r = AwaitAction<DefragReport>(
            req, [&](Reply<DefragReport> reply) {
              return engine->StartDefrag(reply);
            });
        if (!r.ok()) return ReplyStatus(res, r.status());
        RecordKvEvent(state, "defrag", std::nullopt);
        ReplyJson(res, json{{"num_moves", r->num_moves},
                            {"cells_moved", r->cells_moved},
                            {"lower_bound_cells", r->lower_bound_cells},
                            {"num_sequences_left_fragmented",
                             r->num_sequences_left_fragmented},
                            {"ms", r->elapsed_ms}});
      });
}

}  // namespace kvault
