#include "server/http_server.h"

#include <algorithm>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/log.h"
#include "server/http_auth.h"
#include "server/http_listener.h"
#include "server/metrics_text.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;

// Returns the answer every endpoint gives while the model loads.
nlohmann::json LoadingJson(double progress) {
  nlohmann::json j = ErrorJson(
      MakeHttpError(503, kErrUnavailable, "Loading model", kReasonLoading));
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
  l.worker_wait = milliseconds(o.worker_wait_ms);
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
    // Large grammar compiles are rare and CPU-bound: a few threads, so
    // that hostile ones cannot take every core from the engine.
    const int compile_threads = std::clamp(
        static_cast<int>(std::thread::hardware_concurrency() / 2), 1, 4);
    state_.grammar_compiler =
        std::make_unique<GrammarCompiler>(compile_threads, options.test_hooks);
  }

  Status Listen();
  void SetEngine(Engine* engine);
  void SetEngineHost(EngineHost* host);
  void Stop();
  uint16_t port() const { return listener_->port(); }
  ServerState& state() { return state_; }

 private:
  void Describe(const Engine& engine);
  ChatFormat ChooseChatFormat(const LlamaModel& model) const;
  bool Admit(const HttpRequest& head, HttpResponse& res);
  void Handle(HttpRequest& req, HttpResponse& res);

  ServerState state_;
  HttpRouter router_;
  HttpCallbacks callbacks_;
  std::unique_ptr<HttpListener> listener_;
  Mutex stop_mu_;  // serialises Stop
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
                                  kReasonMethodNotAllowed));
    return false;
  }
  if (match.handler == nullptr) {
    ReplyError(res, MakeHttpError(404, kErrNotFound, "File Not Found",
                                  kReasonNoSuchRoute));
    return false;
  }
  if (head.path == "/health" || head.path == "/v1/health") {
    return true;  // public; answers loading itself
  }
  if (IsWebUiPath(state_.options, head.path)) {
    return true;  // public and ready at once: the page asks for the key
  }
  if (!ApiKeyAdmits(state_.options.api_keys, head.Header("Authorization"),
                    head.Header("X-Api-Key"))) {
    res.SetHeader("WWW-Authenticate", "Bearer");
    ReplyError(res, MakeHttpError(401, kErrAuthentication, "Invalid API Key",
                                  kReasonInvalidApiKey));
    return false;
  }
  if (!state_.ready.load()) {
    ReplyJson(res, LoadingJson(state_.load_progress.load()), 503);
    return false;
  }
  return true;
}

void HttpServer::Impl::Handle(HttpRequest& req, HttpResponse& res) {
  HttpRouter::Match match = router_.Find(req.method, req.path);
  if (match.handler == nullptr) {  // Admit found it; cannot happen
    return ReplyError(res, MakeHttpError(404, kErrNotFound, "File Not Found",
                                         kReasonNoSuchRoute));
  }
  req.matches = std::move(match.matches);
  EngineHost::Lease lease;  // a sleeping server wakes for all but reads
  if (state_.host != nullptr && !IsReadOnlyRoute(req) &&
      !IsWebUiPath(state_.options, req.path)) {
    StatusOr<EngineHost::Lease> woken = state_.host->Wake();
    if (!woken.ok()) return ReplyStatus(res, woken.status());
    lease = std::move(woken).value();
  }
  try {
    (*match.handler)(req, res);
    if (res.pump && lease.engine() != nullptr) {
      // A stream runs after this returns: its end releases the lease.
      auto held = std::make_shared<EngineHost::Lease>(std::move(lease));
      res.on_stream_end = [held, end = std::move(res.on_stream_end)](
                              bool completed) {
        if (end) end(completed);
        *held = EngineHost::Lease();
      };
    }
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
  RegisterAbsentRoutes(router_, state_);
  RegisterCompletionRoutes(router_, state_);
  RegisterSlotRoutes(router_, state_);
  RegisterKvRoutes(router_, state_);
  RegisterAnthropicRoutes(router_, state_);
  RegisterResponsesRoutes(router_, state_);
  RegisterWebUiRoutes(router_, state_);  // after the API: shadows nothing
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

// The chat format, in llama-server's order of precedence: a built-in name
// given to --chat-template; with Jinja on, the template given at start-up,
// else the model's own; a family recognised in the model's template (or
// chatml) otherwise. A model template that does not parse falls back to
// the family, with the parser's error logged.
ChatFormat HttpServer::Impl::ChooseChatFormat(const LlamaModel& model) const {
  const ServerOptions& o = state_.options;
  if (!o.chat_template.empty()) {
    StatusOr<ChatTemplateFamily> named = ParseChatTemplateName(o.chat_template);
    if (named.ok()) return ChatFormat(*named);
  }
  StatusOr<std::string> embedded =
      model.file().GetString("tokenizer.chat_template");
  if (o.jinja) {
    std::string source = o.chat_template_source;
    if (source.empty() && embedded.ok()) source = *embedded;
    if (!source.empty()) {
      StatusOr<ChatFormat> jinja = ChatFormat::FromJinja(source);
      if (jinja.ok()) {
        KV_LOG(INFO) << "chat template: Jinja ("
                     << (o.chat_template_source.empty() ? "the model's"
                                                        : "given")
                     << ", " << source.size() << " bytes)";
        return std::move(*jinja);
      }
      KV_LOG(ERROR) << jinja.status() << "; using a built-in template";
    }
  }
  std::optional<ChatTemplateFamily> family;
  if (embedded.ok()) family = DetectChatTemplate(*embedded);
  KV_LOG(INFO) << "chat template: "
               << ChatTemplateFamilyName(
                      family.value_or(ChatTemplateFamily::kChatml))
               << (family ? "" : embedded.ok() ? " (template not recognised)"
                                               : " (model has none)");
  return ChatFormat(family.value_or(ChatTemplateFamily::kChatml));
}

// Sets what the API reports about the model; called once, before `ready`.
void HttpServer::Impl::Describe(const Engine& engine) {
  state_.chat_format = ChooseChatFormat(engine.model());
  state_.chat_format.default_kwargs = state_.options.chat_template_kwargs;
  const LlamaModel& model = engine.model();
  state_.model_id = ModelId(state_.options);
  state_.created = static_cast<int64_t>(std::time(nullptr));
  state_.engine_options = engine.options();
  OaiModelInfo& info = state_.model_info;
  info.id = state_.model_id;
  info.created = state_.created;
  info.n_vocab = model.n_vocab();
  info.n_ctx_train = model.hparams().n_ctx_train;
  info.n_params = model.num_parameters();
  info.size_bytes = model.weight_bytes();
  info.aliases = state_.options.aliases;
  info.tags = state_.options.tags;
  state_.load_progress.store(1.0);
}

void HttpServer::Impl::SetEngine(Engine* engine) {
  Describe(*engine);
  state_.engine.store(engine);
  state_.ready.store(true);  // publishes the fields above
}

void HttpServer::Impl::SetEngineHost(EngineHost* host) {
  EngineHost::Lease lease = host->Peek();  // awake: it was just loaded
  Describe(*lease.engine());
  state_.engine.store(lease.engine());
  ServerState& state = state_;
  host->SetHooks(
      {.before_sleep =
           [&state](Engine& engine) {
             MutexLock lock(&state.metrics_mu);
             EngineMetrics m = engine.Metrics();
             AddCounters(state.counter_base, &m);
             state.counter_base = m;  // only its counters are used
             state.asleep_metrics = m;
             state.asleep_slots = engine.Slots();
             state.engine.store(nullptr);
           },
       .after_wake =
           [&state](Engine& engine) {
             MutexLock lock(&state.metrics_mu);
             state.asleep_metrics.reset();
             state.asleep_slots.clear();
             state.engine.store(&engine);
           }});
  state_.host = host;
  state_.ready.store(true);
}

void HttpServer::Impl::Stop() {
  MutexLock lock(&stop_mu_);
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

void HttpServer::SetEngineHost(EngineHost* host) {
  impl_->SetEngineHost(host);
}

void HttpServer::SetLoadProgress(double fraction) {
  impl_->state().load_progress.store(std::clamp(fraction, 0.0, 1.0));
}

void HttpServer::Stop() { impl_->Stop(); }

uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace kvault
