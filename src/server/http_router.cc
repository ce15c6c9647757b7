#include "server/http_router.h"

namespace kvault {

void HttpRouter::Get(const std::string& pattern, RouteHandler handler) {
  routes_.push_back({"GET", std::regex(pattern), std::move(handler)});
}

void HttpRouter::Post(const std::string& pattern, RouteHandler handler) {
  routes_.push_back({"POST", std::regex(pattern), std::move(handler)});
}

HttpRouter::Match HttpRouter::Find(std::string_view method,
                                   const std::string& path) const {
  const std::string_view wanted = method == "HEAD" ? "GET" : method;
  Match out;
  for (const Route& route : routes_) {
    std::smatch m;
    if (!std::regex_match(path, m, route.pattern)) continue;
    if (route.method != wanted) {
      if (out.allow.find(route.method) == std::string::npos) {
        out.allow += (out.allow.empty() ? "" : ", ") + route.method;
        if (route.method == "GET") out.allow += ", HEAD";
      }
      continue;
    }
    out.handler = &route.handler;
    for (const auto& group : m) out.matches.push_back(group.str());
    out.allow.clear();
    return out;
  }
  return out;
}

}  // namespace kvault
