#include "server/http_cors.h"

#include <algorithm>
#include <cctype>

namespace kvault {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// Removes "http://" or "https://" from `s`; false when it has neither.
bool StripHttpScheme(std::string_view& s) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (s.size() >= scheme.size() &&
        EqualsIgnoreCase(s.substr(0, scheme.size()), scheme)) {
      s.remove_prefix(scheme.size());
      return true;
    }
  }
  return false;
}

// Returns true for "" or ":" followed by 1 to 5 digits.
bool IsPortSuffix(std::string_view s) {
  if (s.empty()) return true;
  if (s.front() != ':' || s.size() < 2 || s.size() > 6) return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

StatusOr<std::vector<std::string>> ParseCorsOrigins(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = std::min(text.find(',', i), text.size());
    std::string_view entry = Trim(text.substr(i, j - i));
    i = j + 1;
    if (entry.empty()) continue;
    std::string_view rest = entry;
    const bool ok = entry == "*" || entry == "localhost" ||
                    (rest.find("://") != std::string_view::npos &&
                     rest.find('/', rest.find("://") + 3) ==
                         std::string_view::npos);
    if (!ok) {
      return InvalidArgumentError(
          "--cors-origins: '" + std::string(entry) +
          "' is not '*', 'localhost' or an origin like "
          "https://example.com:8080 (scheme, host, optional port)");
    }
    out.emplace_back(entry);
  }
  if (out.empty()) {
    return InvalidArgumentError(
        "--cors-origins: empty; give '*', 'localhost' or origins");
  }
  return out;
}

bool IsLocalhostOrigin(std::string_view origin) {
  if (!StripHttpScheme(origin)) return false;
  for (std::string_view host : {"localhost", "127.0.0.1", "[::1]"}) {
    if (origin.size() >= host.size() &&
        EqualsIgnoreCase(origin.substr(0, host.size()), host) &&
        IsPortSuffix(origin.substr(host.size()))) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> CorsAllowOrigin(const CorsOptions& cors,
                                           std::string_view origin) {
  if (origin.empty()) return std::nullopt;
  for (const std::string& allowed : cors.origins) {
    // With credentials a browser rejects "*", so any origin is echoed.
    if (allowed == "*") {
      return cors.credentials ? std::string(origin) : std::string("*");
    }
    if (allowed == "localhost" ? IsLocalhostOrigin(origin)
                               : EqualsIgnoreCase(allowed, origin)) {
      return std::string(origin);
    }
  }
  return std::nullopt;
}

void AddCorsHeaders(const CorsOptions& cors, std::string_view origin,
                    HttpResponse& res) {
  std::optional<std::string> allow = CorsAllowOrigin(cors, origin);
  if (!allow.has_value()) return;
  res.SetHeader("Access-Control-Allow-Origin", *allow);
  if (cors.credentials) {
    res.SetHeader("Access-Control-Allow-Credentials", "true");
  }
  // The answer depends on Origin: caches must not share it across origins.
  if (*allow != "*") res.SetHeader("Vary", "Origin");
}

void ReplyPreflight(const CorsOptions& cors, std::string_view origin,
                    HttpResponse& res) {
  res.status = 200;
  AddCorsHeaders(cors, origin, res);
  res.SetHeader("Access-Control-Allow-Methods", cors.methods);
  res.SetHeader("Access-Control-Allow-Headers", cors.headers);
  res.SetContent("", "text/plain");
}

}  // namespace kvault
