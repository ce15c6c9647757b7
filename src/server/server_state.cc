#include "server/server_state.h"

#include <httplib.h>

namespace kvault {

void ReplyJson(httplib::Response& res, const nlohmann::json& j, int status) {
  res.status = status;
  res.set_content(DumpJson(j), "application/json; charset=utf-8");
}

void ReplyError(httplib::Response& res, const HttpError& error) {
  ReplyJson(res, ErrorJson(error), error.http_status);
}

void ReplyStatus(httplib::Response& res, const Status& status) {
  ReplyError(res, HttpErrorFromStatus(status));
}

void RegisterPost(httplib::Server& server, const std::string& pattern,
                  const ServerState& state, RouteHandler handler) {
  using ReaderHandler =
      std::function<void(const httplib::Request&, httplib::Response&,
                         const httplib::ContentReader&)>;
  // Requests with a body come here; body-less ones to the plain handler.
  server.Post(
      pattern,
      ReaderHandler([&state, handler](const httplib::Request& req,
                                      httplib::Response& res,
                                      const httplib::ContentReader& reader) {
        const uint64_t limit = state.options.max_body_bytes;
        httplib::Request with_body = req;  // `matches` still points into req
        bool too_large = false;
        bool read = reader([&](const char* data, size_t size) {
          if (with_body.body.size() + size > limit) {
            too_large = true;
            return false;
          }
          with_body.body.append(data, size);
          return true;
        });
        if (too_large || res.status == 413) {
          res.set_header("Connection", "close");  // the rest is not read
          return ReplyError(
              res, MakeHttpError(413, kErrInvalidRequest,
                                 "request body exceeds the server's limit of " +
                                     std::to_string(limit) + " bytes",
                                 "body_too_large"));
        }
        if (!read) {
          res.set_header("Connection", "close");
          return ReplyError(
              res,
              MakeHttpError(400, kErrInvalidRequest,
                            "could not read the request body", "bad_request"));
        }
        handler(with_body, res);
      }));
  server.Post(pattern, httplib::Server::Handler(std::move(handler)));
}

CompletionLimits LimitsFor(const ServerState& state, const Engine& engine) {
  CompletionLimits limits;
  limits.max_n_predict = state.options.max_n_predict;
  limits.n_ctx_slot = engine.options().ctx_per_slot;
  limits.n_slots = engine.options().n_slots;
  return limits;
}

}  // namespace kvault
