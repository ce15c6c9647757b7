// POST /slots/{id}?action=save|restore|erase, answered exactly as
// llama-server does; the error mapping is HttpErrorFromStatus's.
#include <charconv>
#include <filesystem>

#include "server/action_wait.h"
#include "server/json_fields.h"
#include "server/server_state.h"
#include "server/slot_filename.h"

namespace kvault {
namespace {

using Request = HttpRequest;
using Response = HttpResponse;
using nlohmann::json;

// Returns the slot id in the URL after checking it names an existing slot.
StatusOr<uint32_t> ParseSlotId(const std::string& text, uint32_t n_slots) {
  uint64_t id = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, id);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    return InvalidArgumentError("slot id '" + text +
                                "' is not a non-negative integer")
        .WithReason(kReasonInvalidSlotId);
  }
  if (ec == std::errc::result_out_of_range || id >= n_slots) {
    return InvalidArgumentError("slot " + text +
                                " does not exist; valid "
                                "ids are [0, " +
                                std::to_string(n_slots) + ")")
        .WithReason(kReasonSlotOutOfRange);
  }
  return static_cast<uint32_t>(id);
}

// Returns the validated `filename` of the body.
StatusOr<std::string> ReadFilename(const Request& req) {
  KV_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
  std::string filename;
  KV_RETURN_IF_ERROR(ReadString(body, "filename", &filename));
  if (FindField(body, "filename") == nullptr) {
    return InvalidArgumentError("field 'filename' is required")
        .WithReason(kReasonMissingField);
  }
  KV_RETURN_IF_ERROR(ValidateSlotFilename(filename));
  return filename;
}

std::string PathIn(const ServerState& state, const std::string& filename) {
  return (std::filesystem::path(state.options.slot_save_path) / filename)
      .string();
}

StatusOr<json> Save(const ServerState& state, uint32_t slot,
                    const Request& req) {
  KV_ASSIGN_OR_RETURN(std::string filename, ReadFilename(req));
  Engine* engine = state.engine.load();
  KV_ASSIGN_OR_RETURN(
      SlotSaveResult r,
      AwaitAction<SlotSaveResult>(req, [&](Reply<SlotSaveResult> reply) {
        return engine->StartSave(slot, PathIn(state, filename), reply);
      }));
  return json{{"id_slot", slot},
              {"filename", filename},
              {"n_saved", r.n_saved},
              {"n_written", r.n_written},
              {"timings", {{"save_ms", r.save_ms}}}};
}

StatusOr<json> Restore(const ServerState& state, uint32_t slot,
                       const Request& req) {
  KV_ASSIGN_OR_RETURN(std::string filename, ReadFilename(req));
  Engine* engine = state.engine.load();
  KV_ASSIGN_OR_RETURN(
      SlotRestoreResult r,
      AwaitAction<SlotRestoreResult>(req, [&](Reply<SlotRestoreResult> reply) {
        return engine->StartRestore(slot, PathIn(state, filename), reply);
      }));
  return json{{"id_slot", slot},
              {"filename", filename},
              {"n_restored", r.n_restored},
              {"n_read", r.n_read},
              {"timings", {{"restore_ms", r.restore_ms}}}};
}

StatusOr<json> Erase(const ServerState& state, uint32_t slot,
                     const Request& req) {
  Engine* engine = state.engine.load();
  KV_ASSIGN_OR_RETURN(uint64_t n_erased,
                      AwaitAction<uint64_t>(req, [&](Reply<uint64_t> reply) {
                        return engine->StartErase(slot, reply);
                      }));
  return json{{"id_slot", slot}, {"n_erased", n_erased}};
}

StatusOr<json> RunSlotAction(const ServerState& state, const Request& req) {
  if (state.options.slot_save_path.empty()) {
    return UnimplementedError(
               "This server does not support slots action. "
               "Start it with --slot-save-path")
        .WithReason(kReasonSlotSavePathUnset);
  }
  const Engine& engine = *state.engine.load();
  KV_ASSIGN_OR_RETURN(uint32_t slot,
                      ParseSlotId(req.matches[1], engine.options().n_slots));
  const std::string action = req.Param("action");
  if (action == "save") return Save(state, slot, req);
  if (action == "restore") return Restore(state, slot, req);
  if (action == "erase") return Erase(state, slot, req);
  return InvalidArgumentError("Invalid action '" + action +
                              "'; expected save, restore or erase")
      .WithReason(kReasonInvalidAction);
}

}  // namespace

void RegisterSlotRoutes(HttpRouter& server, ServerState& state) {
  RegisterPost(server, R"(/slots/([^/]*))", state,
               [&state](const Request& req, Response& res) {
                 ++state.slot_actions_total;
                 StatusOr<json> out = RunSlotAction(state, req);
                 if (!out.ok()) {
                   ++state.slot_actions_failed;
                   return ReplyStatus(res, out.status());
                 }
                 RecordKvEvent(state, req.Param("action"),
                               (*out)["id_slot"].get<uint32_t>());
                 ReplyJson(res, *out);
               });
}

}  // namespace kvault
