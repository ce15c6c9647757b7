#include "core/reasons.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace kvault {
namespace {

TEST(ReasonsTest, EveryReasonIsUniqueSnakeCase) {
  std::set<std::string_view> seen;
  for (std::string_view reason : kAllReasons) {
    EXPECT_TRUE(seen.insert(reason).second) << "twice: " << reason;
    ASSERT_FALSE(reason.empty());
    EXPECT_TRUE(reason.front() >= 'a' && reason.front() <= 'z') << reason;
    for (char c : reason) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
          << reason;
    }
  }
}

// A client reads what a reason means in the API reference.
TEST(ReasonsTest, EveryReasonIsDocumented) {
  std::ifstream in(std::string(KVAULT_SOURCE_DIR) + "/docs/http_api.md");
  ASSERT_TRUE(in) << "docs/http_api.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (std::string_view reason : kAllReasons) {
    EXPECT_NE(doc.find("`" + std::string(reason) + "`"), std::string::npos)
        << "docs/http_api.md does not list reason `" << reason << "`";
  }
}

}  // namespace
}  // namespace kvault
