#include "server/http_auth.h"

#include <cctype>

namespace kvault {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= x ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

bool BearerTokenMatches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        kScheme[i]) {
      return false;
    }
  }
  std::string_view token = authorization.substr(kScheme.size());
  if (token.front() != ' ') return false;
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return ConstantTimeEquals(token, key);
}

bool ApiKeyAdmits(const std::vector<std::string>& keys,
                  std::string_view authorization,
                  std::string_view x_api_key) {
  bool admitted = keys.empty();
  // Every key is compared, so the time does not tell which one matched.
  for (const std::string& key : keys) {
    admitted |= BearerTokenMatches(authorization, key);
    admitted |= !x_api_key.empty() && ConstantTimeEquals(x_api_key, key);
  }
  return admitted;
}

}  // namespace kvault
