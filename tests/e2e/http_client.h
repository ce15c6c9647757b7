// Small HTTP helpers for the end-to-end tests: JSON requests and SSE
// streams against a server on 127.0.0.1.
#ifndef KVAULT_TESTS_E2E_HTTP_CLIENT_H_
#define KVAULT_TESTS_E2E_HTTP_CLIENT_H_

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvault::e2e {

struct Reply {
  int status = 0;  // 0: no HTTP reply (connection error)
  nlohmann::json body;
  std::string raw;
};

struct StreamReply {
  int status = 0;
  std::vector<nlohmann::json> events;  // each "data: {json}" event
  bool done_marker = false;            // saw "data: [DONE]"
  std::string raw;
};

// Returns the value of the first sample of Prometheus series `name` in
// `text` (a line "name value" or "name{labels} value"), or nullopt.
inline std::optional<double> MetricValue(const std::string& text,
                                         const std::string& name) {
  size_t at = 0;
  while ((at = text.find("\n" + name, at)) != std::string::npos) {
    const size_t begin = at + 1 + name.size();
    const size_t end = text.find('\n', begin);
    const std::string rest = text.substr(begin, end - begin);
    at = begin;
    if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue;
    const size_t space = rest.rfind(' ');
    return std::stod(rest.substr(space + 1));
  }
  return std::nullopt;
}

class HttpClient {
 public:
  // Talks to 127.0.0.1:`port`; `api_key` non-empty adds a bearer header.
  explicit HttpClient(uint16_t port, std::string api_key = "")
      : port_(port), api_key_(std::move(api_key)) {}

  // GET `path`; the body parsed as JSON when it is JSON.
  Reply Get(const std::string& path) const {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(300, 0);
    auto res = cli.Get(path.c_str(), Headers());
    return ToReply(res);
  }

  // POST `body` as JSON to `path`.
  Reply Post(const std::string& path, const nlohmann::json& body) const {
    return PostRaw(path, body.dump());
  }

  // POST raw `body` with content type application/json.
  Reply PostRaw(const std::string& path, const std::string& body) const {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(300, 0);
    auto res = cli.Post(path.c_str(), Headers(), body, "application/json");
    return ToReply(res);
  }

  // POST `body` and reads the SSE stream; `on_event` (optional) sees each
  // parsed event and may return false to hang up.
  StreamReply Stream(const std::string& path, const nlohmann::json& body,
                     std::function<bool(const nlohmann::json&)> on_event =
                         {}) const {
    StreamReply out;
    std::string pending;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = Headers();
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    req.content_receiver = [&](const char* data, size_t n, uint64_t,
                               uint64_t) {
      out.raw.append(data, n);
      pending.append(data, n);
      return Drain(&pending, &out, on_event);
    };
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(300, 0);
    auto res = cli.send(req);
    if (res) out.status = res->status;
    return out;
  }

 private:
  httplib::Headers Headers() const {
    httplib::Headers h;
    if (!api_key_.empty()) h.emplace("Authorization", "Bearer " + api_key_);
    return h;
  }

  static Reply ToReply(const httplib::Result& res) {
    Reply r;
    if (!res) return r;
    r.status = res->status;
    r.raw = res->body;
    r.body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/
                                   false);
    return r;
  }

  // Parses complete "data: ..." events out of `pending`.
  static bool Drain(std::string* pending, StreamReply* out,
                    const std::function<bool(const nlohmann::json&)>& cb) {
    size_t end;
    while ((end = pending->find("\n\n")) != std::string::npos) {
      std::string event = pending->substr(0, end);
      pending->erase(0, end + 2);
      // The data line, after an optional "event: NAME" line.
      const size_t at = event.rfind("data: ", 0) == 0 ? 0 : event.find("\ndata: ");
      if (at == std::string::npos) continue;
      const std::string data = event.substr(at == 0 ? 6 : at + 7);
      if (data == "[DONE]") {
        out->done_marker = true;
        continue;
      }
      out->events.push_back(nlohmann::json::parse(data, nullptr, false));
      if (cb && !cb(out->events.back())) return false;
    }
    return true;
  }

  uint16_t port_;
  std::string api_key_;
};

}  // namespace kvault::e2e

#endif  // KVAULT_TESTS_E2E_HTTP_CLIENT_H_
