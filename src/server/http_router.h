// Maps a method and path to a route handler. Patterns are regular
// expressions matched against the whole (percent-decoded) path; their
// groups become HttpRequest::matches. HEAD is served by the GET route.
#ifndef KVAULT_SERVER_HTTP_ROUTER_H_
#define KVAULT_SERVER_HTTP_ROUTER_H_

#include <functional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"

namespace kvault {

// A route handler: reads the request, fills in the response.
using RouteHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

class HttpRouter {
 public:
  struct Match {
    const RouteHandler* handler = nullptr;  // null: no route
    std::vector<std::string> matches;       // the pattern's groups
    std::string allow;  // without handler: the methods the path has, if any
  };

  // Registers GET `pattern` (HEAD too).
  void Get(const std::string& pattern, RouteHandler handler);
  // Registers POST `pattern`.
  void Post(const std::string& pattern, RouteHandler handler);
  // Returns the route for `method` and `path`; routes are tried in the
  // order they were registered.
  Match Find(std::string_view method, const std::string& path) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    RouteHandler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_ROUTER_H_
