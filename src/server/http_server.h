// HttpServer: llama-server's HTTP API (plus kvault's /kv endpoints) over an
// Engine, on kvault's own HTTP/1.1 layer (http_listener.h: strict framing,
// deadlines, a connection limit, graceful stop). It listens before the
// model is ready: until SetEngine, /health answers 503
// {"error":{... "message":"Loading model"}} and every other endpoint 503
// too.
//
// Routes, JSON fields and error mapping: docs/http_api.md.
#ifndef KVAULT_SERVER_HTTP_SERVER_H_
#define KVAULT_SERVER_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "engine/engine.h"
#include "server/chat_tools.h"
#include "server/engine_host.h"
#include "server/http_cors.h"

namespace kvault {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;        // 0: any free port (see HttpServer::port)
  // --api-key: any one of them admits a request; empty: no
  // authentication.
  std::vector<std::string> api_keys;
  std::string slot_save_path;  // empty: slot save/restore answer 501
  std::string model_path;      // shown by /props and /v1/models
  bool demo_model = false;     // --demo-random: the random-weight model
  // What the served model is, for people: the log, /props' "model_label"
  // and the web UI's header (e.g. the embedded TinyStories model); empty:
  // the file name says it.
  std::string model_label;
  bool webui = true;  // --no-webui: no page at / (the API alone)
  // --alias: the names the API reports for the model (the first is its id);
  // empty: the file name. --tags: reported by /v1/models.
  std::vector<std::string> aliases;
  std::vector<std::string> tags;
  bool metrics_endpoint = false;  // --metrics: GET /metrics (else 501)
  bool props_endpoint = false;    // --props: POST /props (else 501)
  bool slots_endpoint = true;     // --no-slots: GET /slots answers 501
  CorsOptions cors;               // --cors-*: llama-server's defaults
  // --chat-template NAME: a built-in family; empty: detected from the model.
  std::string chat_template;
  // --jinja (default) / --no-jinja: render Jinja chat templates.
  bool jinja = true;
  // A Jinja template given by --chat-template SOURCE or
  // --chat-template-file (checked at start-up); empty: the model's.
  std::string chat_template_source;
  // --chat-template-kwargs: template variables for every request.
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  // --reasoning-format, --reasoning, --reasoning-effort, --skip-chat-parsing.
  ChatOutputOptions chat_output;
  // KVAULT_TEST_HOOKS=1 in the environment: chat requests may script the
  // reply (end-to-end tests of tool-call parsing with tiny models).
  bool test_hooks = false;
  // What a request's omitted fields default to (--temp, --seed, -n,
  // --ignore-eos, --cache-prompt, ...).
  CompletionParams defaults;
  // -v: every OpenAI reply carries "__verbose" (as if each request said
  // "verbose": true).
  bool verbose = false;
  bool spm_infill = false;  // --spm-infill: /infill puts the suffix first
  uint64_t max_body_bytes = 8u << 20;
  // HTTP worker threads, one connection each; a request that finds them all
  // busy waits up to worker_wait_ms for one to come free, then is answered
  // 503 too_many_connections.
  uint32_t max_connections = 64;
  uint32_t worker_wait_ms = 500;
  // Deadlines (milliseconds): the whole request head, the whole body after
  // it, a keep-alive connection's wait for its next request, a response
  // write without progress. A late head or body gets 408.
  uint32_t head_timeout_ms = 10000;
  uint32_t body_timeout_ms = 60000;
  uint32_t idle_timeout_ms = 5000;
  uint32_t write_timeout_ms = 60000;
  // Stop: how long responses in progress may still write (a stream's last
  // error event and terminating chunk).
  uint32_t stop_grace_ms = 2000;
  // --sleep-idle-seconds: 0 never sleeps (the serve command builds the
  // EngineHost from it).
  uint32_t sleep_idle_seconds = 0;
};

class HttpServer {
 public:
  // Binds `options.host:port` (InvalidArgument / Unavailable on failure)
  // and starts serving on background threads.
  static StatusOr<std::unique_ptr<HttpServer>> Start(
      const ServerOptions& options);
  // Stops listening and joins the threads.
  ~HttpServer();

  // Makes the server ready: requests go to `engine` (not owned; outlives
  // the server or until Stop).
  void SetEngine(Engine* engine);
  // Makes the server ready over a host that may unload the engine when
  // idle (--sleep-idle-seconds): requests other than health, props, models
  // and metrics wake it (not owned; outlives the server or until Stop).
  void SetEngineHost(EngineHost* host);
  // Shows model-load progress in /health's loading answer ([0, 1]).
  void SetLoadProgress(double fraction);
  // Stops accepting connections, closes idle and half-read ones at once,
  // ends streams in flight with an error event and their terminating chunk
  // (within stop_grace_ms), cancels waiting requests and joins every HTTP
  // thread. Idempotent.
  void Stop();
  // Returns the port actually bound.
  uint16_t port() const;

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_SERVER_H_
