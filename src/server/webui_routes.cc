// GET / and the web UI's assets (webui/, embedded at build time). Only the
// exact names embedded get a route, so no path (a "../" one included) can
// reach anything else, an unknown name is the usual 404 JSON, and no API
// route is shadowed. They are public like /health: the page itself asks
// for the API key and sends it with its API calls, as llama-server's does.
#include <cstdio>
#include <string>
#include <string_view>

#include "core/checksum.h"
#include "server/server_state.h"
#include "server/webui_assets.h"

namespace kvault {
namespace {

using Request = HttpRequest;
using Response = HttpResponse;

std::string ContentTypeFor(std::string_view name) {
  auto ends_with = [name](std::string_view ext) {
    return name.size() >= ext.size() &&
           name.substr(name.size() - ext.size()) == ext;
  };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// A strong validator: the asset's bytes are fixed for the binary's life.
std::string ETagOf(std::string_view data) {
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(
                    Xxh3_64(data.data(), data.size())));
  return "\"" + std::string(hex) + "\"";
}

// Returns `name` as a regular expression matching only itself.
std::string LiteralPattern(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// Returns a handler answering `file`: 304 when the browser holds this
// version, else the bytes; "no-cache" makes it revalidate on each load, so
// a new binary's UI is never mixed with an old one's cached script.
RouteHandler AssetHandler(const EmbeddedFile& file) {
  return [&file, etag = ETagOf(file.data),
          type = ContentTypeFor(file.name)](const Request& req,
                                             Response& res) {
    res.SetHeader("ETag", etag);
    res.SetHeader("Cache-Control", "no-cache");
    res.SetHeader("X-Content-Type-Options", "nosniff");
    if (req.Header("If-None-Match") == etag) {
      res.status = 304;
      return;
    }
    res.SetContent(std::string(file.data), type);
  };
}

}  // namespace

bool IsWebUiPath(const ServerOptions& options, std::string_view path) {
  if (!options.webui || path.empty() || path[0] != '/') return false;
  return path == "/" ||
         FindEmbeddedFile(WebUiAssets(), path.substr(1)) != nullptr;
}

void RegisterWebUiRoutes(HttpRouter& server, ServerState& state) {
  if (!state.options.webui) return;
  for (const EmbeddedFile& file : WebUiAssets()) {
    if (file.name == "index.html") server.Get("/", AssetHandler(file));
    server.Get("/" + LiteralPattern(file.name), AssetHandler(file));
  }
}

}  // namespace kvault
