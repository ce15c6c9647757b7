#include "server/unsupported_fields.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

using nlohmann::json;

TEST(UnsupportedFieldsTest, RefusesWhatIsAskedForByName) {
  const json asks[] = {
      {{"tools", json::array({{{"type", "function"}}})}},
      {{"tool_choice", "required"}},
      {{"lora", json::array({{{"id", 0}, {"scale", 1.0}}})}},
      {{"n_indent", 2}},
      {{"echo", true}},
      {{"best_of", 3}},
      {{"chat_template_kwargs", {{"enable_thinking", false}}}},
      {{"modalities", json::array({"text", "audio"})}},
      {{"store", true}},
  };
  for (const json& body : asks) {
    SCOPED_TRACE(body.dump());
    Status s = CheckUnsupportedFields(body);
    EXPECT_EQ(s.reason(), "unsupported_field");
    EXPECT_NE(s.message().find("'" + body.begin().key() + "'"),
              std::string::npos)
        << s.message();
  }
}

TEST(UnsupportedFieldsTest, NoOpValuesAndUnknownFieldsPass) {
  const json fine[] = {
      {{"grammar", ""}},
      {{"json_schema", nullptr}},
      {{"response_format", {{"type", "text"}}}},
      {{"tools", json::array()}},
      {{"tool_choice", "auto"}},
      {{"tool_choice", "none"}},
      {{"lora", json::array()}},
      {{"n_indent", 0}},
      {{"echo", false}},
      {{"best_of", 1}},
      {{"modalities", json::array({"text"})}},
      {{"store", false}},
      {{"user", "u-1"}},
      {{"some_client_extra", {{"x", 1}}}},
  };
  for (const json& body : fine) {
    EXPECT_TRUE(CheckUnsupportedFields(body).ok())
        << body.dump() << ": " << CheckUnsupportedFields(body).message();
  }
}

}  // namespace
}  // namespace kvault
