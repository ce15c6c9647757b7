#include "server/responses_codec.h"

#include <gtest/gtest.h>

#include "server/anthropic_codec.h"
#include "server_test_util.h"

namespace kvault {
namespace {

using nlohmann::json;

class ResponsesCodecTest : public testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel();
    ASSERT_NE(model_, nullptr);
    limits_.defaults.n_predict = 50;
    limits_.n_ctx_slot = 400;
    limits_.n_slots = 1;
    ctx_.id = "resp_3";
    ctx_.message_id = "msg_3";
    ctx_.model = "m.gguf";
    ctx_.created = 1700000000;
    ctx_.prompt_tokens = 12;
  }
  StatusOr<ResponsesRequest> Parse(const json& body) {
    return ParseResponsesRequest(body, model_->tokenizer(), limits_,
                                 ChatTemplateFamily::kChatml);
  }
  std::string Error(const json& body) {
    auto r = Parse(body);
    return r.ok() ? "ok"
                  : std::string(r.status().reason()) + ": " +
                        std::string(r.status().message());
  }

  std::unique_ptr<LlamaModel> model_;
  CompletionLimits limits_;
  ResponsesContext ctx_;
};

TEST_F(ResponsesCodecTest, FieldsMapToParams) {
  auto r = Parse({{"input", "Hi"},
                  {"instructions", "Be brief"},
                  {"max_output_tokens", 8},
                  {"temperature", 0.8},
                  {"top_p", 0.5},
                  {"stream", true},
                  {"store", false},
                  {"metadata", {{"k", "v"}}},
                  {"timings_per_token", true},
                  {"return_progress", true}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completion.params.n_predict, 8);
  EXPECT_FLOAT_EQ(r->completion.params.sampling.temperature, 0.8f);
  EXPECT_FLOAT_EQ(r->completion.params.sampling.top_p, 0.5f);
  EXPECT_TRUE(r->completion.stream);
  EXPECT_TRUE(r->timings_per_token);
  EXPECT_TRUE(r->return_progress);
  EXPECT_TRUE(r->completion.params.return_progress);  // engine reports it
  EXPECT_EQ(r->metadata, json({{"k", "v"}}));
  EXPECT_EQ(r->completion.params.prompt,
            model_->tokenizer().Tokenize(
                "<|im_start|>system\nBe brief<|im_end|>\n"
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                true, true));
}

TEST_F(ResponsesCodecTest, InputItems) {
  auto m = ResponsesChatMessages(
      {{"input",
        {{{"role", "developer"}, {"content", "D"}},
         {{"type", "message"},
          {"role", "user"},
          {"content", json::array({{{"type", "input_text"}, {"text", "a"}},
                                   {{"type", "input_text"}, {"text", "b"}}})}},
         {{"role", "assistant"},
          {"content",
           json::array({{{"type", "output_text"}, {"text", "c"}}})}}}}});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].role, "system");
  EXPECT_EQ((*m)[1].content, "a\nb");
  EXPECT_EQ((*m)[2].content, "c");
}

TEST_F(ResponsesCodecTest, ErrorsNameTheField) {
  EXPECT_EQ(Error(json::object()), "missing_field: field 'input' is required");
  EXPECT_EQ(Error({{"input", "x"}, {"previous_response_id", "resp_1"}}),
            "unsupported_field: field 'previous_response_id' is not "
            "supported: kvault stores no responses");
  // Function tools go the chat route's way; a malformed one is named.
  EXPECT_EQ(Error({{"input", "x"}, {"tools", {{{"type", "function"}}}}}),
            "invalid_tools: field 'tools[0].name': expected a string");
  EXPECT_EQ(Error({{"input", "x"}, {"tools", {{{"type", "file_search"}}}}}),
            "unsupported_field: field 'tools[0].type' is not supported: only "
            "\"function\" tools (kvault runs no built-in or hosted tools)");
  EXPECT_EQ(Error({{"input", "x"}, {"store", true}}),
            "unsupported_field: field 'store' is not supported: kvault "
            "stores no responses");
  EXPECT_EQ(Error({{"input", "x"},
                   {"text", {{"format", {{"type", "json_object"}}}}}}),
            "unsupported_field: field 'text.format.type' is not supported: "
            "only \"text\" (got \"json_object\")");
  EXPECT_EQ(Error({{"input", {{{"type", "file_search_call"}}}}}),
            "unsupported_content: field 'input[0].type': "
            "\"file_search_call\" items are not supported (supported: "
            "message, function_call, function_call_output)");
  EXPECT_EQ(Error({{"input", {{{"type", "function_call"}, {"name", 3}}}}}),
            "invalid_tools: field 'input[0].name': expected a string");
  EXPECT_EQ(Error({{"input", 5}}),
            "invalid_field: field 'input': expected a string or a non-empty "
            "array of items, got integer 5");
  auto r = Parse({{"input",
                   {{{"role", "user"},
                     {"content", {{{"type", "input_image"}}}}}}}});
  EXPECT_EQ(r.status().message(), kImageNotSupported);
}

CompletionResult Result() {
  CompletionResult r;
  r.content = "hey";
  r.stop_type = "limit";
  r.tokens_evaluated = 12;
  r.tokens_predicted = 3;
  r.timings.cache_n = 10;
  return r;
}

// Regression (issue 41): a response cut at max_output_tokens said
// "completed" next to its incomplete_details; OpenAI says "incomplete"
// and gives no completed_at.
TEST_F(ResponsesCodecTest, ResponseJson) {
  json j = ResponsesJson(Result(), ctx_);
  EXPECT_FALSE(j.contains("completed_at"));
  EXPECT_EQ(j, json::parse(R"({"id":"resp_3","object":"response",
    "created_at":1700000000,"status":"incomplete","model":"m.gguf",
    "metadata":{},"incomplete_details":{"reason":"max_output_tokens"},
    "output":[{"id":"msg_3","type":"message","status":"completed",
      "role":"assistant","content":[{"type":"output_text","text":"hey",
      "annotations":[],"logprobs":[]}]}],
    "usage":{"input_tokens":12,"output_tokens":3,"total_tokens":15,
             "input_tokens_details":{"cached_tokens":10}}})"));
  CompletionResult whole = Result();
  whole.stop_type = "eos";
  const json w = ResponsesJson(whole, ctx_);
  EXPECT_EQ(w["status"], "completed");
  EXPECT_TRUE(w.contains("completed_at"));
  EXPECT_TRUE(w["incomplete_details"].is_null());
}

TEST_F(ResponsesCodecTest, StreamSequence) {
  ctx_.timings_per_token = true;
  ctx_.return_progress = true;
  ResponsesStreamFormatter f(ctx_);
  PromptProgress progress;
  progress.total = 12;
  progress.cache = 10;
  progress.processed = 12;
  TokenEvent t;
  t.text = "he";
  std::string sse = f.Start(0);
  sse += f.Progress(progress, 0);
  sse += f.Token(t, 0);
  sse += f.Done(Result());
  std::vector<json> events;
  for (size_t pos = 0; (pos = sse.find("data: ", pos)) != std::string::npos;) {
    const size_t end = sse.find("\n\n", pos);
    events.push_back(json::parse(sse.substr(pos + 6, end - pos - 6)));
    pos = end;
  }
  std::vector<std::string> types;
  for (const json& e : events) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress",
                       "response.in_progress", "response.output_item.added",
                       "response.content_part.added",
                       "response.output_text.delta",
                       "response.output_text.delta",
                       "response.output_text.done",
                       "response.content_part.done",
                       "response.output_item.done", "response.completed"}));
  EXPECT_FALSE(events[1].contains("prompt_progress"));
  EXPECT_EQ(events[2]["prompt_progress"]["total"], 12);
  EXPECT_EQ(events[2]["prompt_progress"]["cache"], 10);
  EXPECT_TRUE(events[2]["timings"].contains("prompt_per_second"));
  EXPECT_TRUE(events[5]["timings"].contains("predicted_per_second"));
  EXPECT_EQ(events[6]["delta"], "y");
  EXPECT_EQ(events[7]["text"], "hey");
  EXPECT_EQ(events[10]["response"]["usage"]["output_tokens"], 3);
  EXPECT_EQ(events[10]["timings"]["cache_n"], 10);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
  }
}

// Without return_progress, progress reports add nothing; a stream whose
// first event is a token still opens the response first.
TEST_F(ResponsesCodecTest, StreamWithoutStartOrProgress) {
  ResponsesStreamFormatter f(ctx_);
  PromptProgress progress;
  progress.total = 12;
  std::string sse = f.Progress(progress, 0);
  sse += f.Progress(progress, 0);
  TokenEvent t;
  t.text = "he";
  sse += f.Token(t, 0);
  EXPECT_EQ(sse.find("prompt_progress"), std::string::npos);
  std::vector<std::string> types;
  for (size_t pos = 0; (pos = sse.find("event: ", pos)) != std::string::npos;
       pos += 7) {
    types.push_back(sse.substr(pos + 7, sse.find('\n', pos) - pos - 7));
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress",
                       "response.output_item.added",
                       "response.content_part.added",
                       "response.output_text.delta"}));
}

}  // namespace
}  // namespace kvault
