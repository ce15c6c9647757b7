// Token probabilities in every output form (issue 41 item 2): each
// generated token carries its own logprob, also when it is not among the top
// N, and streamed replies carry one entry per token, as the whole reply does.
#include <gtest/gtest.h>

#include "server/http_server.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;

class HttpLogprobsTest : public StoriesServerTest {
 protected:
  // POSTs a streamed request; returns the JSON chunks ([DONE] dropped).
  std::vector<json> Stream(const std::string& path, json body) {
    std::vector<json> chunks;
    for (const std::string& payload : StreamPayloads(path, std::move(body))) {
      if (payload != "[DONE]") chunks.push_back(json::parse(payload));
    }
    return chunks;
  }
};

// Checks one OpenAI/llama-server logprob entry: its own logprob always,
// equal to its top_logprobs entry when listed there. Returns whether it was.
bool ExpectOwnLogprob(const json& entry) {
  EXPECT_TRUE(entry.contains("logprob")) << entry.dump();
  if (!entry.contains("logprob")) return false;
  const double own = entry["logprob"];
  EXPECT_LE(own, 0.0);
  const json& top = entry["top_logprobs"];
  EXPECT_FALSE(top.empty());
  for (const json& t : top) {
    if (t["id"] == entry["id"]) {
      EXPECT_EQ(t["logprob"].get<double>(), own) << entry.dump();
      return true;
    }
  }
  // Not listed: less likely than every listed token.
  EXPECT_LE(own, top.back()["logprob"].get<double>()) << entry.dump();
  return false;
}

// Regression: a sampled token outside the top n_probs had no "logprob".
TEST_F(HttpLogprobsTest, EveryTokenCarriesItsOwnLogprob) {
  auto [code, r] = s().Post("/completion", {{"prompt", "Once upon a time"},
                                            {"n_predict", 24},
                                            {"n_probs", 1},
                                            {"temperature", 2.0},
                                            {"seed", 7}});
  ASSERT_EQ(code, 200) << r.dump();
  int num_unlisted = 0;
  for (const json& entry : r["completion_probabilities"]) {
    num_unlisted += ExpectOwnLogprob(entry) ? 0 : 1;
  }
  // The seed makes some picks fall outside the top one, the case that
  // lacked the field.
  EXPECT_GT(num_unlisted, 0) << r["completion_probabilities"].dump();

  auto [ccode, c] = s().Post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Tell a story"}}}},
       {"max_tokens", 24},
       {"logprobs", true},
       {"top_logprobs", 1},
       {"temperature", 2.0},
       {"seed", 7}});
  ASSERT_EQ(ccode, 200) << c.dump();
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content.empty());
  for (const json& entry : content) ExpectOwnLogprob(entry);
}

// Returns the ids of the logprob entries in `chunks`, in order.
std::vector<int> StreamedIds(const std::vector<json>& chunks) {
  std::vector<int> ids;
  for (const json& chunk : chunks) {
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& lp = chunk["choices"][0].value("logprobs", json());
    if (lp.is_null()) continue;
    for (const json& entry : lp["content"]) {
      ExpectOwnLogprob(entry);
      ids.push_back(entry["id"]);
    }
  }
  return ids;
}

std::vector<int> Ids(const json& content) {
  std::vector<int> ids;
  for (const json& entry : content) ids.push_back(entry["id"]);
  return ids;
}

// Regression: streamed chat completions carried no logprobs at all.
TEST_F(HttpLogprobsTest, StreamedChatCarriesOneEntryPerToken) {
  const json body = {
      {"messages", {{{"role", "user"}, {"content", "Tell a story"}}}},
      {"max_tokens", 20},
      {"logprobs", true},
      {"top_logprobs", 3},
      {"temperature", 0},
      {"stream_options", {{"include_usage", true}}}};
  std::vector<json> chunks = Stream("/v1/chat/completions", body);
  ASSERT_FALSE(chunks.empty());
  const std::vector<int> streamed = StreamedIds(chunks);
  EXPECT_EQ(streamed.size(),
            chunks.back()["usage"]["completion_tokens"].get<size_t>());
  json whole_body = body;
  whole_body.erase("stream_options");
  auto [code, whole] = s().Post("/v1/chat/completions", whole_body);
  ASSERT_EQ(code, 200) << whole.dump();
  EXPECT_EQ(streamed, Ids(whole["choices"][0]["logprobs"]["content"]));
}

// Tokens whose text is held back (a possible stop string) still send their
// entries, with the next chunk that goes out.
TEST_F(HttpLogprobsTest, StreamedCompletionsKeepHeldBackTokensEntries) {
  auto [code, whole] = s().Post("/v1/completions", {{"prompt", "Once upon"},
                                                   {"max_tokens", 20},
                                                   {"logprobs", 2},
                                                   {"temperature", 0}});
  ASSERT_EQ(code, 200) << whole.dump();
  const std::string text = whole["choices"][0]["text"];
  ASSERT_GT(text.size(), 4u);
  // A stop string that never matches but whose first letters keep coming
  // back holds text in every form: the text's last letter plus a letter it
  // never has after it.
  const json body = {{"prompt", "Once upon"},
                     {"max_tokens", 20},
                     {"logprobs", 2},
                     {"temperature", 0},
                     {"stop", {std::string(1, text.back()) + "\x01"}}};
  std::vector<json> chunks = Stream("/v1/completions", body);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(StreamedIds(chunks),
            Ids(whole["choices"][0]["logprobs"]["content"]));
}

}  // namespace
}  // namespace kvault
