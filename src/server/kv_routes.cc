// kvault's extensions: GET /kv (pool statistics and the page -> slot map)
// and POST /kv/defrag.
#include "server/action_wait.h"
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

json KvMapJson(const KvMap& map) {
  json pages = json::array();
  for (const std::optional<uint32_t>& slot : map.page_slot) {
    pages.push_back(slot.has_value() ? json(*slot) : json(nullptr));
  }
  return json{{"pool", PoolJson(map.stats)},
              {"page_size", map.page_size},
              {"num_pages", map.page_slot.size()},
              {"page_slot", std::move(pages)},
              {"map", MapText(map)}};
}

}  // namespace

void RegisterKvRoutes(HttpRouter& server, ServerState& state) {
  server.Get("/kv", [&state](const Request&, Response& res) {
    ReplyJson(res, KvMapJson(state.engine.load()->GetKvMap()));
  });
  RegisterPost(
      server, "/kv/defrag", state, [&state](const Request& req, Response& res) {
        Engine* engine = state.engine.load();
        StatusOr<DefragReport> r = AwaitAction<DefragReport>(
            req, [&](Reply<DefragReport> reply) {
              return engine->StartDefrag(reply);
            });
        if (!r.ok()) return ReplyStatus(res, r.status());
        ReplyJson(res, json{{"num_moves", r->num_moves},
                            {"cells_moved", r->cells_moved},
                            {"lower_bound_cells", r->lower_bound_cells},
                            {"num_sequences_left_fragmented",
                             r->num_sequences_left_fragmented},
                            {"ms", r->elapsed_ms}});
      });
}

}  // namespace kvault
