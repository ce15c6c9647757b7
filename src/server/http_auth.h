// --api-key checks: "Authorization: Bearer KEY" or "X-Api-Key: KEY",
// compared in constant time.
#ifndef KVAULT_SERVER_HTTP_AUTH_H_
#define KVAULT_SERVER_HTTP_AUTH_H_

#include <string>
#include <string_view>
#include <vector>

namespace kvault {

// Returns a == b in time that depends only on b's length (b is the secret).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Returns true when `authorization` (the header's value) is "Bearer <key>"
// ("Bearer" case-insensitive, spaces around the token ignored).
bool BearerTokenMatches(std::string_view authorization, std::string_view key);

// Returns true when `keys` is empty (no authentication), `authorization`
// carries one of them as a bearer token, or `x_api_key` (the X-Api-Key
// header Anthropic clients send) is one of them.
bool ApiKeyAdmits(const std::vector<std::string>& keys,
                  std::string_view authorization,
                  std::string_view x_api_key = {});

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_AUTH_H_
