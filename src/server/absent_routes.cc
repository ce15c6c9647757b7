// llama-server endpoints for features kvault does not have: each answers
// what is missing instead of a bare 404, as /infill does for a model
// without FIM tokens.
#include "core/reasons.h"
#include "server/server_state.h"

namespace kvault {

void RegisterAbsentRoutes(HttpRouter& server, ServerState& state) {
  auto no_embeddings = [](const HttpRequest& req, HttpResponse& res) {
    ReplyError(res, MakeHttpError(
                        501, kErrNotSupported,
                        "POST " + req.path +
                            ": kvault serves text generation only; "
                            "embeddings and reranking are not built "
                            "(--embeddings and --reranking are refused)",
                        kReasonEmbeddingsUnsupported));
  };
  for (const char* path :
       {"/embedding", "/embeddings", "/v1/embeddings", "/rerank",
        "/reranking", "/v1/rerank", "/v1/reranking"}) {
    RegisterPost(server, path, state, no_embeddings);
  }
  // No adapter is ever loaded (--lora is refused at start).
  server.Get("/lora-adapters", [](const HttpRequest&, HttpResponse& res) {
    ReplyJson(res, nlohmann::json::array());
  });
}

}  // namespace kvault
