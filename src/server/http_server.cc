#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "server/http_auth.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using httplib::Request;
using httplib::Response;
using HandlerResponse = httplib::Server::HandlerResponse;

// Returns the answer every endpoint gives while the model loads.
nlohmann::json LoadingJson(double progress) {
  nlohmann::json j = ErrorJson(
      MakeHttpError(503, kErrUnavailable, "Loading model", "loading"));
  j["progress"] = progress;
  return j;
}

// Fills in a JSON body for an error httplib produced itself (no route,
// body too large, bad request line) or a handler left without a body.
void FillErrorBody(const ServerOptions& options, Response& res) {
  if (!res.body.empty() || res.is_chunked_content_provider_) return;
  HttpError e;
  switch (res.status) {
    case 404:
      e = MakeHttpError(404, kErrNotFound, "File Not Found", "no_such_route");
      break;
    case 413:
      e = MakeHttpError(413, kErrInvalidRequest,
                        "request body exceeds the server's limit of " +
                            std::to_string(options.max_body_bytes) + " bytes",
                        "body_too_large");
      break;
    case 400:
      e = MakeHttpError(400, kErrInvalidRequest, "malformed HTTP request",
                        "bad_request");
      break;
    default:
      e = MakeHttpError(res.status,
                        res.status >= 500 ? kErrServer : kErrInvalidRequest,
                        "HTTP error " + std::to_string(res.status),
                        "http_" + std::to_string(res.status));
      break;
  }
  ReplyError(res, e);
}

// Returns the model's name for OpenAI responses: the file name, or
// "kvault-demo" for the embedded model.
std::string ModelId(const ServerOptions& options) {
  if (options.demo_model || options.model_path.empty()) return "kvault-demo";
  return std::filesystem::path(options.model_path).filename().string();
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(const ServerOptions& options) { state_.options = options; }

  Status Listen();
  void SetEngine(Engine* engine);
  void Stop();
  uint16_t port() const { return port_; }
  ServerState& state() { return state_; }

 private:
  void Configure();
  HandlerResponse PreRoute(const Request& req, Response& res);

  ServerState state_;
  httplib::Server server_;
  std::thread listener_;
  std::atomic<bool> listener_exited_{false};
  uint16_t port_ = 0;
  std::mutex stop_mu_;
};

void HttpServer::Impl::Configure() {
  const ServerOptions& o = state_.options;
  const size_t num_threads = std::max<uint32_t>(1, o.max_connections);
  server_.new_task_queue = [num_threads] {
    return new httplib::ThreadPool(num_threads);
  };
  server_.set_payload_max_length(o.max_body_bytes);
  server_.set_default_headers({{"Server", "kvault"}});
  server_.set_pre_routing_handler(
      [this](const Request& req, Response& res) { return PreRoute(req, res); });
  server_.set_error_handler([this](const Request&, Response& res) {
    FillErrorBody(state_.options, res);
  });
  server_.set_exception_handler(
      [](const Request&, Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        KV_LOG(ERROR) << "request handler threw: " << what;
        ReplyError(res, MakeHttpError(500, kErrServer, what, "internal"));
      });
  RegisterInfoRoutes(server_, state_);
  RegisterCompletionRoutes(server_, state_);
  RegisterSlotRoutes(server_, state_);
  RegisterKvRoutes(server_, state_);
}

HandlerResponse HttpServer::Impl::PreRoute(const Request& req, Response& res) {
  if (req.path == "/health" || req.path == "/v1/health") {
    return HandlerResponse::Unhandled;  // public; answers loading itself
  }
  const std::string& key = state_.options.api_key;
  if (!key.empty() &&
      !BearerTokenMatches(req.get_header_value("Authorization"), key)) {
    ReplyError(res, MakeHttpError(401, kErrAuthentication, "Invalid API Key",
                                  "invalid_api_key"));
    return HandlerResponse::Handled;
  }
  if (state_.engine.load() == nullptr) {
    ReplyJson(res, LoadingJson(state_.load_progress.load()), 503);
    return HandlerResponse::Handled;
  }
  return HandlerResponse::Unhandled;
}

Status HttpServer::Impl::Listen() {
  const ServerOptions& o = state_.options;
  if (o.host.empty()) return InvalidArgumentError("server host is empty");
  Configure();
  int port = o.port;
  if (o.port == 0) {
    port = server_.bind_to_any_port(o.host);
  } else if (!server_.bind_to_port(o.host, o.port)) {
    port = -1;
  }
  if (port <= 0) {
    return UnavailableError("cannot listen on " + o.host + ":" +
                            std::to_string(o.port) +
                            " (address in use or not local?)")
        .WithReason("bind_failed");
  }
  port_ = static_cast<uint16_t>(port);
  listener_ = std::thread([this] {
    server_.listen_after_bind();
    listener_exited_.store(true);
  });
  // stop() is a no-op until the listener runs, so wait for it.
  while (!server_.is_running() && !listener_exited_.load()) {
    std::this_thread::yield();
  }
  KV_LOG(INFO) << "HTTP server listening on " << o.host << ":" << port_ << " ("
               << o.max_connections << " worker threads)";
  return Status::Ok();
}

void HttpServer::Impl::SetEngine(Engine* engine) {
  const LlamaModel& model = engine->model();
  StatusOr<std::string> jinja =
      model.file().GetString("tokenizer.chat_template");
  std::optional<ChatTemplateFamily> family;
  if (jinja.ok()) family = DetectChatTemplate(*jinja);
  state_.chat_family = family.value_or(ChatTemplateFamily::kChatml);
  if (!family.has_value()) {
    KV_LOG(INFO) << (jinja.ok() ? "chat template not recognised"
                                : "model has no chat template")
                 << "; using chatml";
  } else {
    KV_LOG(INFO) << "chat template: " << ChatTemplateFamilyName(*family);
  }
  state_.model_id = ModelId(state_.options);
  state_.created = static_cast<int64_t>(std::time(nullptr));
  state_.load_progress.store(1.0);
  state_.engine.store(engine);  // publishes the fields above
}

void HttpServer::Impl::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!listener_.joinable()) return;
  state_.stopping.store(true);  // streams and waiters cancel their tasks
  server_.stop();
  listener_.join();  // also joins the worker threads
  KV_LOG(INFO) << "HTTP server stopped";
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const ServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  KV_RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::SetEngine(Engine* engine) { impl_->SetEngine(engine); }

void HttpServer::SetLoadProgress(double fraction) {
  impl_->state().load_progress.store(std::clamp(fraction, 0.0, 1.0));
}

void HttpServer::Stop() { impl_->Stop(); }

uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace kvault
