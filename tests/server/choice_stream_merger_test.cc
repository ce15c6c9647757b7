#include "server/choice_stream_merger.h"

#include <gtest/gtest.h>

#include "server/sse_sink.h"

namespace kvault {
namespace {

using nlohmann::json;

TEST(ChoiceStreamMergerTest, OpenAiChunksGetTheirIndexOneIdAndOneUsage) {
  ChoiceStreamMerger m(/*openai=*/true);
  const json a = {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"},
                  {"created", 5}, {"model", "m"},
                  {"choices", {{{"index", 0}, {"delta", {{"content", "x"}}}}}}};
  json b = a;
  b["id"] = "chatcmpl-2";
  b["created"] = 6;
  json usage_a = a;
  usage_a["choices"] = json::array();
  usage_a["usage"] = {{"prompt_tokens", 4}, {"completion_tokens", 2},
                      {"prompt_tokens_details", {{"cached_tokens", 1}}}};
  json usage_b = usage_a;
  usage_b["usage"]["completion_tokens"] = 3;
  EXPECT_EQ(m.Tag(0, SseData(a)), SseData(a));
  json want_b = a;  // the first task's id and created
  want_b["choices"][0]["index"] = 1;
  EXPECT_EQ(m.Tag(1, SseData(b)), SseData(want_b));
  EXPECT_EQ(m.Tag(0, SseData(usage_a) + std::string(kSseDone)), "");
  EXPECT_EQ(m.Tag(1, SseData(usage_b) + std::string(kSseDone)), "");
  json end = usage_a;
  end["usage"] = {{"prompt_tokens", 8}, {"completion_tokens", 5},
                  {"prompt_tokens_details", {{"cached_tokens", 2}}}};
  EXPECT_EQ(m.End(), SseData(end) + std::string(kSseDone));
}

TEST(ChoiceStreamMergerTest, LlamaEventsGetTheirIndexAndErrorsPassAsTheyAre) {
  ChoiceStreamMerger m(/*openai=*/false);
  const json event = {{"index", 0}, {"content", "hi"}, {"stop", false}};
  json want = event;
  want["index"] = 2;
  EXPECT_EQ(m.Tag(2, SseData(event)), SseData(want));
  const json error = {{"error", {{"code", 500}, {"message", "boom"}}}};
  EXPECT_EQ(m.Tag(1, SseData(error)), SseData(error));
  EXPECT_EQ(m.Tag(0, "event: ping\n\n"), "event: ping\n\n");
  EXPECT_EQ(m.End(), "");
}

}  // namespace
}  // namespace kvault
