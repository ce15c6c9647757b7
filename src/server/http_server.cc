#include "server/http_server.h"

#include <algorithm>
#include <ctime>
#include <exception>
#include <filesystem>
#include <mutex>

#include "core/log.h"
#include "server/http_auth.h"
#include "server/http_listener.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;

// Returns the answer every endpoint gives while the model loads.
nlohmann::json LoadingJson(double progress) {
  nlohmann::json j = ErrorJson(
      MakeHttpError(503, kErrUnavailable, "Loading model", "loading"));
  j["progress"] = progress;
  return j;
}

// Returns the model's name for OpenAI responses: the file name, or
// "kvault-demo" for the embedded model.
std::string ModelId(const ServerOptions& options) {
  if (!options.aliases.empty()) return options.aliases.front();
  if (options.demo_model || options.model_path.empty()) return "kvault-demo";
  return std::filesystem::path(options.model_path).filename().string();
}

ListenerOptions ToListenerOptions(const ServerOptions& o) {
  ListenerOptions l;
  l.host = o.host;
  l.port = o.port;
  l.max_connections = o.max_connections;
  l.connection.limits.max_body_bytes = o.max_body_bytes;
  l.connection.head_timeout = milliseconds(o.head_timeout_ms);
  l.connection.body_timeout = milliseconds(o.body_timeout_ms);
  l.connection.idle_timeout = milliseconds(o.idle_timeout_ms);
  l.connection.write_timeout = milliseconds(o.write_timeout_ms);
  return l;
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(const ServerOptions& options) {
    state_.options = options;
    state_.started = static_cast<int64_t>(std::time(nullptr));
  }

  Status Listen();
  void SetEngine(Engine* engine);
  void Stop();
  uint16_t port() const { return listener_->port(); }
  ServerState& state() { return state_; }

 private:
  bool Admit(const HttpRequest& head, HttpResponse& res);
  void Handle(HttpRequest& req, HttpResponse& res);

  ServerState state_;
  HttpRouter router_;
  HttpCallbacks callbacks_;
  std::unique_ptr<HttpListener> listener_;
  std::mutex stop_mu_;
};

// Runs on the request head, before any body byte is read: CORS headers go
// on every answer and an OPTIONS preflight is answered on any path; then an
// unknown route is a 404 (405 for a known path with another method), then
// the API key, then the loading answer.
bool HttpServer::Impl::Admit(const HttpRequest& head, HttpResponse& res) {
  const std::string origin = head.Header("Origin");
  AddCorsHeaders(state_.options.cors, origin, res);
  if (head.method == "OPTIONS") {
    ReplyPreflight(state_.options.cors, origin, res);
    return false;
  }
  const HttpRouter::Match match = router_.Find(head.method, head.path);
  if (match.handler == nullptr && !match.allow.empty()) {
    res.SetHeader("Allow", match.allow);
    ReplyError(res, MakeHttpError(405, kErrInvalidRequest,
                                  "method " + head.method +
                                      " is not allowed "
                                      "on " +
                                      head.path + "; allowed: " + match.allow,
                                  "method_not_allowed"));
    return false;
  }
  if (match.handler == nullptr) {
    ReplyError(res, MakeHttpError(404, kErrNotFound, "File Not Found",
                                  "no_such_route"));
    return false;
  }
  if (head.path == "/health" || head.path == "/v1/health") {
    return true;  // public; answers loading itself
  }
  if (!ApiKeyAdmits(state_.options.api_keys, head.Header("Authorization"))) {
    res.SetHeader("WWW-Authenticate", "Bearer");
    ReplyError(res, MakeHttpError(401, kErrAuthentication, "Invalid API Key",
                                  "invalid_api_key"));
    return false;
  }
  if (state_.engine.load() == nullptr) {
    ReplyJson(res, LoadingJson(state_.load_progress.load()), 503);
    return false;
  }
  return true;
}

void HttpServer::Impl::Handle(HttpRequest& req, HttpResponse& res) {
  HttpRouter::Match match = router_.Find(req.method, req.path);
  if (match.handler == nullptr) {  // Admit found it; cannot happen
    return ReplyError(res, MakeHttpError(404, kErrNotFound, "File Not Found",
                                         "no_such_route"));
  }
  req.matches = std::move(match.matches);
  try {
    (*match.handler)(req, res);
  } catch (const std::exception& e) {
    KV_LOG(ERROR) << "request handler threw: " << e.what();
    // Admit's CORS headers must survive, or a browser hides the 500.
    HttpHeaders cors = std::move(res.headers);
    res = HttpResponse();
    res.headers = std::move(cors);
    ReplyError(res, MakeHttpError(500, kErrServer, e.what(), "internal"));
  }
}

Status HttpServer::Impl::Listen() {
  const ServerOptions& o = state_.options;
  RegisterInfoRoutes(router_, state_);
  RegisterCompletionRoutes(router_, state_);
  RegisterSlotRoutes(router_, state_);
  RegisterKvRoutes(router_, state_);
  callbacks_.admit = [this](const HttpRequest& head, HttpResponse& res) {
    return Admit(head, res);
  };
  callbacks_.handle = [this](HttpRequest& req, HttpResponse& res) {
    Handle(req, res);
  };
  KV_ASSIGN_OR_RETURN(listener_,
                      HttpListener::Start(ToListenerOptions(o), &callbacks_));
  KV_LOG(INFO) << "HTTP server listening on " << o.host << ":"
               << listener_->port() << " (" << o.max_connections
               << " worker threads)";
  return Status::Ok();
}

void HttpServer::Impl::SetEngine(Engine* engine) {
  const LlamaModel& model = engine->model();
  StatusOr<std::string> jinja =
      model.file().GetString("tokenizer.chat_template");
  std::optional<ChatTemplateFamily> family;
  if (!state_.options.chat_template.empty()) {
    // Checked by the command line before the model loaded.
    family = ParseChatTemplateName(state_.options.chat_template).value();
  } else if (jinja.ok()) {
    family = DetectChatTemplate(*jinja);
  }
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
  if (state_.stopping.exchange(true)) return;  // streams and waiters cancel
  listener_->Stop(milliseconds(state_.options.stop_grace_ms));
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
