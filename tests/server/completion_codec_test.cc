#include "server/completion_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server_test_util.h"

namespace kvault {
namespace {

using nlohmann::json;

class CompletionCodecTest : public testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel();
    ASSERT_NE(model_, nullptr);
    limits_.defaults.n_predict = 100;
    limits_.n_ctx_slot = 64;
    limits_.n_slots = 2;
  }
  const Tokenizer& tok() const { return model_->tokenizer(); }
  StatusOr<CompletionRequest> Parse(const json& body) const {
    return ParseCompletionRequest(body, tok(), limits_);
  }
  // Returns the error of parsing `body`, which must fail.
  Status Error(const json& body) const {
    auto r = Parse(body);
    EXPECT_FALSE(r.ok()) << body.dump();
    return r.ok() ? Status::Ok() : r.status();
  }

  std::unique_ptr<LlamaModel> model_;
  CompletionLimits limits_;
};

TEST_F(CompletionCodecTest, DefaultsAreLlamaServers) {
  auto r = Parse(json{{"prompt", "hi"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const CompletionParams& p = r->params;
  EXPECT_EQ(p.prompt, tok().Tokenize("hi", true, true));
  EXPECT_EQ(p.n_predict, 100);  // the server's -n
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.8f);
  EXPECT_EQ(p.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.05f);
  EXPECT_EQ(p.sampling.seed, kRandomSeed);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.slot.has_value());
  EXPECT_TRUE(p.cache_prompt);
  EXPECT_EQ(p.n_probs, 0u);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->return_tokens);
}

TEST_F(CompletionCodecTest, EveryFieldIsRead) {
  json body{{"prompt", "hi"},
            {"n_predict", 12},
            {"temperature", 0},
            {"top_k", 5},
            {"top_p", 0.5},
            {"min_p", 0.1},
            {"seed", 42},
            {"stop", json::array({"a", "bc"})},
            {"stream", true},
            {"id_slot", 1},
            {"cache_prompt", false},
            {"n_probs", 3},
            {"return_tokens", true},
            {"ignore_eos", true},
            {"repeat_penalty", 1.1},
            {"repeat_last_n", 16}};
  auto r = Parse(body);
  ASSERT_TRUE(r.ok()) << r.status();
  const CompletionParams& p = r->params;
  EXPECT_EQ(p.n_predict, 12);
  EXPECT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_EQ(p.sampling.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(p.slot, std::optional<uint32_t>(1));
  EXPECT_FALSE(p.cache_prompt);
  EXPECT_EQ(p.n_probs, 3u);
  EXPECT_TRUE(r->return_tokens);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FLOAT_EQ(p.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(p.sampling.repeat_last_n, 16);
}

TEST_F(CompletionCodecTest, SpecialValues) {
  auto r = Parse(json{{"prompt", "hi"},
                      {"stop", "x"},
                      {"seed", -1},
                      {"id_slot", -1},
                      {"repeat_last_n", -1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r->params.sampling.seed, kRandomSeed);
  EXPECT_FALSE(r->params.slot.has_value());
  EXPECT_EQ(r->params.sampling.repeat_last_n, 64);  // the slot context
  r = Parse(json{{"prompt", "hi"}, {"n_predict", nullptr}, {"stop", ""}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->params.stop.empty());
}

TEST_F(CompletionCodecTest, WrongTypesNameTheFieldAndBothTypes) {
  struct Case {
    json body;
    std::string message;
  };
  const Case cases[] = {
      {{{"prompt", 5}},
       "field 'prompt': expected a string or an array of token ids and "
       "strings, got integer 5"},
      {{{"prompt", "x"}, {"n_predict", "10"}},
       "field 'n_predict': expected an integer, got string \"10\""},
      {{{"prompt", "x"}, {"temperature", "hot"}},
       "field 'temperature': expected a number, got string \"hot\""},
      {{{"prompt", "x"}, {"top_k", 1.5}},
       "field 'top_k': expected an integer, got number 1.5"},
      {{{"prompt", "x"}, {"top_p", true}},
       "field 'top_p': expected a number, got boolean true"},
      {{{"prompt", "x"}, {"min_p", json::array()}},
       "field 'min_p': expected a number, got array []"},
      {{{"prompt", "x"}, {"seed", "1"}},
       "field 'seed': expected an integer, got string \"1\""},
      {{{"prompt", "x"}, {"stop", 3}},
       "field 'stop': expected a string or an array, got integer 3"},
      {{{"prompt", "x"}, {"stop", json::array({"a", 1})}},
       "field 'stop[1]': expected a string, got integer 1"},
      {{{"prompt", "x"}, {"stream", "yes"}},
       "field 'stream': expected a boolean, got string \"yes\""},
      {{{"prompt", "x"}, {"id_slot", "0"}},
       "field 'id_slot': expected an integer, got string \"0\""},
      {{{"prompt", "x"}, {"cache_prompt", 1}},
       "field 'cache_prompt': expected a boolean, got integer 1"},
      {{{"prompt", "x"}, {"n_probs", json::object()}},
       "field 'n_probs': expected an integer, got object {}"},
      {{{"prompt", "x"}, {"return_tokens", "true"}},
       "field 'return_tokens': expected a boolean, got string \"true\""},
      {{{"prompt", "x"}, {"ignore_eos", 0}},
       "field 'ignore_eos': expected a boolean, got integer 0"},
      {{{"prompt", "x"}, {"repeat_penalty", "1"}},
       "field 'repeat_penalty': expected a number, got string \"1\""},
      {{{"prompt", "x"}, {"repeat_last_n", 2.5}},
       "field 'repeat_last_n': expected an integer, got number 2.5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    Status s = Error(c.body);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.reason(), "invalid_field");
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST_F(CompletionCodecTest, LimitsAndRanges) {
  // As llama-server (its suite's test_completion_unified asks 80 of a
  // server started with -n 64): a request's own budget wins over -n (100
  // here), which is the budget of a request without one.
  for (int64_t asked : {int64_t{101}, int64_t{5000}, int64_t{1000000000}}) {
    auto own = Parse(json{{"prompt", "x"}, {"n_predict", asked}});
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_EQ(own->params.n_predict, asked);
  }
  auto below = Parse(json{{"prompt", "x"}, {"n_predict", 7}});
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(below->params.n_predict, 7);
  auto unlimited = Parse(json{{"prompt", "x"}, {"n_predict", -1}});
  ASSERT_TRUE(unlimited.ok());
  EXPECT_EQ(unlimited->params.n_predict, 100);
  Status s;
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"n_predict", -2}}).reason(),
            "out_of_range");
  s = Error(json{{"prompt", "x"}, {"id_slot", 2}});
  EXPECT_EQ(s.reason(), "slot_out_of_range");
  EXPECT_NE(s.message().find("[0, 2)"), std::string_view::npos);
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"id_slot", -2}}).reason(),
            "out_of_range");
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"n_probs", 101}}).reason(),
            "out_of_range");
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"top_p", -0.5}}).code(),
            StatusCode::kInvalidArgument);  // SamplingParams::Validate
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"temperature", 1e39}}).reason(),
            "out_of_range");
}

TEST_F(CompletionCodecTest, PromptTooLongOrEmptyOrMissing) {
  // Length against the context is the route's check (http_server_test).
  EXPECT_TRUE(Parse(json{{"prompt", json(std::vector<int>(64, 10))}}).ok());
  EXPECT_EQ(Error(json{{"prompt", json::array()}}).reason(), "empty_prompt");
  // "" tokenizes to BOS alone; it once ran as a 200 of up to 4096 tokens.
  EXPECT_EQ(Error(json{{"prompt", ""}}).reason(), "empty_prompt");
  EXPECT_EQ(Error(json{{"prompt", json::array({"", ""})}}).reason(),
            "empty_prompt");
  EXPECT_TRUE(Parse(json{{"prompt", json::array({"", 7})}}).ok());
  EXPECT_EQ(Error(json{{"n_predict", 1}}).reason(), "missing_field");
}

TEST_F(CompletionCodecTest, SamplerFieldsOutsideTheirDomainAreOutOfRange) {
  struct Case {
    json body;
    std::string want_in_message;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "x"}, {"min_p", 1.5}}, "field 'min_p': "},
      {{{"prompt", "x"}, {"top_p", -1}}, "field 'top_p': "},
      {{{"prompt", "x"}, {"top_p", 1.5}}, "field 'top_p': "},
      {{{"prompt", "x"}, {"repeat_penalty", 0}}, "field 'repeat_penalty': "},
      {{{"prompt", "x"}, {"temperature", -1e308}},
       "field 'temperature': -1e+308 is outside the float range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    Status s = Error(c.body);
    EXPECT_EQ(s.reason(), "out_of_range");
    EXPECT_THAT(s.message(), ::testing::HasSubstr(c.want_in_message));
  }
}

TEST_F(CompletionCodecTest, PromptAsTokenIdsIsUsedVerbatim) {
  auto r = Parse(json{{"prompt", {5, 6, 7}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.prompt, (std::vector<TokenId>{5, 6, 7}));  // no BOS
}

TEST_F(CompletionCodecTest, MixedPromptArrays) {
  // A leading string gets BOS (when the vocab adds one), later ones do not.
  auto r = Parse(json{{"prompt", json::array({"ab", 9, "cd"})}});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<TokenId> want = tok().Tokenize("ab", true, true);
  want.push_back(9);
  for (TokenId t : tok().Tokenize("cd", false, true)) want.push_back(t);
  EXPECT_EQ(r->params.prompt, want);
  r = Parse(json{{"prompt", json::array({9, "cd"})}});
  ASSERT_TRUE(r.ok()) << r.status();
  want = {9};
  for (TokenId t : tok().Tokenize("cd", false, true)) want.push_back(t);
  EXPECT_EQ(r->params.prompt, want);
}

TEST_F(CompletionCodecTest, BadPromptElements) {
  const int64_t n_vocab = static_cast<int64_t>(tok().num_tokens());
  Status s = Error(json{{"prompt", {1, n_vocab}}});
  EXPECT_EQ(s.reason(), "out_of_range");
  EXPECT_EQ(s.message(), "field 'prompt[1]': token id " +
                             std::to_string(n_vocab) +
                             " is outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")");
  EXPECT_EQ(Error(json{{"prompt", {-1}}}).reason(), "out_of_range");
  s = Error(json{{"prompt", json::array({json::array({1, 2})})}});
  EXPECT_EQ(s.message(),
            "field 'prompt[0]': expected a token id (integer), got array "
            "[1,2]");
  EXPECT_EQ(Error(json{{"prompt", {1.5}}}).reason(), "invalid_field");
  EXPECT_EQ(Error(json{{"prompt", {true}}}).reason(), "invalid_field");
}

CompletionResult SampleResult() {
  CompletionResult r;
  r.slot = 1;
  r.content = "hello world";
  r.tokens = {10, 11};
  r.stop_type = "word";
  r.stopping_word = "!";
  r.tokens_predicted = 2;
  r.tokens_evaluated = 5;
  r.tokens_cached = 7;
  r.truncated = false;
  r.timings.prompt_n = 4;
  r.timings.prompt_ms = 8;
  r.timings.predicted_n = 2;
  r.timings.predicted_ms = 10;
  r.timings.cache_n = 1;
  return r;
}

TEST_F(CompletionCodecTest, ResponseHasEveryField) {
  CompletionRequest req;
  req.return_tokens = true;
  json j = CompletionResponseJson(req, SampleResult(), {}, tok());
  EXPECT_EQ(j["content"], "hello world");
  EXPECT_EQ(j["tokens"], json({10, 11}));
  EXPECT_EQ(j["id_slot"], 1);
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["stop_type"], "word");
  EXPECT_EQ(j["stopping_word"], "!");
  EXPECT_EQ(j["tokens_predicted"], 2);
  EXPECT_EQ(j["tokens_evaluated"], 5);
  EXPECT_EQ(j["tokens_cached"], 7);
  EXPECT_EQ(j["truncated"], false);
  EXPECT_FALSE(j.contains("completion_probabilities"));
  const json& t = j["timings"];
  EXPECT_EQ(t["prompt_n"], 4);
  EXPECT_DOUBLE_EQ(t["prompt_ms"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 500.0);
  EXPECT_EQ(t["predicted_n"], 2);
  EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 10.0);
  // Two tokens are one decode step: the first came with the prompt.
  EXPECT_DOUBLE_EQ(t["predicted_per_token_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 100.0);
  EXPECT_EQ(t["cache_n"], 1);
  req.return_tokens = false;
  EXPECT_EQ(CompletionResponseJson(req, SampleResult(), {}, tok())["tokens"],
            json::array());
}

TEST_F(CompletionCodecTest, ZeroTimingsGiveZeroRates) {
  json t = TimingsJson(CompletionTimings{});
  EXPECT_EQ(t["prompt_per_second"], 0.0);
  EXPECT_EQ(t["predicted_per_token_ms"], 0.0);
}

TEST_F(CompletionCodecTest, OneTokenHasNoGenerationRate) {
  CompletionTimings timings;
  timings.predicted_n = 1;
  timings.predicted_ms = 3.0;
  json t = TimingsJson(timings);
  EXPECT_EQ(t["predicted_per_second"], 0.0);
  EXPECT_EQ(t["predicted_per_token_ms"], 0.0);
}

TEST_F(CompletionCodecTest, CompletionProbabilities) {
  CompletionRequest req;
  req.params.n_probs = 2;
  TokenEvent e;
  e.token = 70;
  e.text = "C";
  e.probs = {{70, -0.1f}, {71, -2.5f}};
  e.logprob = -0.1f;
  TokenEvent unlisted = e;  // sampled outside the top two
  unlisted.token = 72;
  unlisted.logprob = -4.0f;
  json j = CompletionResponseJson(req, SampleResult(), {e, unlisted}, tok());
  ASSERT_EQ(j["completion_probabilities"].size(), 2u);
  EXPECT_FLOAT_EQ(j["completion_probabilities"][1]["logprob"].get<float>(),
                  -4.0f);
  const json& p = j["completion_probabilities"][0];
  EXPECT_EQ(p["id"], 70);
  EXPECT_EQ(p["token"], std::string(tok().TokenToPiece(70, true)));
  EXPECT_FLOAT_EQ(p["logprob"].get<float>(), -0.1f);
  ASSERT_EQ(p["top_logprobs"].size(), 2u);
  EXPECT_EQ(p["top_logprobs"][1]["id"], 71);
  EXPECT_FLOAT_EQ(p["top_logprobs"][1]["logprob"].get<float>(), -2.5f);
  EXPECT_TRUE(p["bytes"].is_array());
}

// Splits an SSE stream into its JSON payloads; checks the framing.
std::vector<json> SseObjects(const std::string& text) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < text.size()) {
    EXPECT_EQ(text.compare(pos, 6, "data: "), 0) << text.substr(pos);
    size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    out.push_back(json::parse(text.substr(pos + 6, end - pos - 6)));
    pos = end + 2;
  }
  return out;
}

TEST_F(CompletionCodecTest, StreamFormatterTokensThenFinal) {
  CompletionRequest req;
  req.stream = true;
  req.return_tokens = true;
  CompletionStreamFormatter f(req, &tok());
  TokenEvent a;
  a.token = 10;
  a.text = "hello";
  TokenEvent held;  // held back: could start a stop string
  held.token = 11;
  std::string text = f.Token(a, 1);
  text += f.Token(held, 1);
  CompletionResult r = SampleResult();
  r.content = "hello world";
  text += f.Done(r);
  std::vector<json> events = SseObjects(text);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["content"], "hello");
  EXPECT_EQ(events[0]["tokens"], json({10}));
  EXPECT_EQ(events[0]["stop"], false);
  EXPECT_EQ(events[0]["id_slot"], 1);
  EXPECT_EQ(events[1]["content"], "");
  EXPECT_EQ(events[1]["tokens"], json({11}));
  const json& last = events[2];
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["content"], " world");  // the held-back tail
  EXPECT_EQ(last["stop_type"], "word");
  EXPECT_EQ(last["tokens_predicted"], 2);
  EXPECT_TRUE(last["timings"].is_object());
  EXPECT_EQ(last["tokens"], json::array());
}

// As llama-server: every token is a chunk with its id, even while its text
// is held back (for a stop string or an incomplete UTF-8 sequence).
TEST_F(CompletionCodecTest, StreamFormatterSendsEveryTokenWithItsId) {
  CompletionRequest req;
  CompletionStreamFormatter f(req, &tok());
  TokenEvent held;
  held.token = 42;
  const std::string chunk = f.Token(held, 1);
  ASSERT_EQ(chunk.rfind("data: ", 0), 0u) << chunk;
  json j = json::parse(chunk.substr(6));
  EXPECT_EQ(j["content"], "");
  EXPECT_EQ(j["tokens"], json::array({42}));
  EXPECT_EQ(j["stop"], false);
  EXPECT_EQ(j["id_slot"], 1);
}

// return_progress and timings_per_token, as llama-server streams them.
TEST_F(CompletionCodecTest, StreamFormatterProgressAndLiveTimings) {
  CompletionRequest req;
  req.params.prompt = {1, 2, 3, 4, 5};
  req.timings_per_token = true;
  CompletionStreamFormatter f(req, &tok());
  PromptProgress p;
  p.total = 5;
  p.cache = 1;
  p.processed = 3;
  p.time_ms = 7.9;
  p.timings.prompt_n = 2;
  p.timings.prompt_ms = 7.9;
  json j = SseObjects(f.Progress(p, -1)).at(0);
  EXPECT_EQ(j["prompt_progress"],
            json({{"total", 5}, {"cache", 1}, {"processed", 3}, {"time_ms", 7}}));
  EXPECT_EQ(j["content"], "");
  EXPECT_EQ(j["tokens"], json::array());
  EXPECT_EQ(j["tokens_evaluated"], 5);
  EXPECT_EQ(j["timings"]["prompt_n"], 2);
  TokenEvent e;
  e.token = 9;
  e.timings.predicted_n = 1;
  json t = SseObjects(f.Token(e, 0)).at(0);
  EXPECT_EQ(t["tokens_predicted"], 1);
  EXPECT_EQ(t["tokens_evaluated"], 5);
  EXPECT_EQ(t["timings"]["predicted_n"], 1);
  EXPECT_FALSE(t.contains("prompt_progress"));
  req.timings_per_token = false;
  CompletionStreamFormatter plain(req, &tok());
  EXPECT_FALSE(SseObjects(plain.Token(e, 0)).at(0).contains("timings"));
}

TEST_F(CompletionCodecTest, ResponseFieldsSelectNestedFields) {
  auto r = Parse(json{{"prompt", "Once"},
                      {"n_predict", 3},
                      {"response_fields",
                       {"content", "generation_settings/n_predict", "nope"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  CompletionResult result;
  result.content = "abc";
  json out = CompletionResponseJson(*r, result, {}, tok());
  EXPECT_EQ(out, json({{"content", "abc"},
                       {"generation_settings/n_predict", 3}}));
  EXPECT_EQ(Error(json{{"prompt", "x"}, {"response_fields", "content"}})
                .reason(),
            "invalid_field");
}

TEST_F(CompletionCodecTest, TokenizeAndDetokenize) {
  auto tokenize = [this](const json& body) -> StatusOr<json> {
    KV_ASSIGN_OR_RETURN(std::string text, HandleTokenize(body, tok()));
    return json::parse(text);
  };
  auto t = tokenize(json{{"content", "hello"}});
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<TokenId> ids = tok().Tokenize("hello", false, true);
  EXPECT_EQ((*t)["tokens"], json(ids));
  t = tokenize(json{{"content", "hello"}, {"add_special", true}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["tokens"], json(tok().Tokenize("hello", true, true)));
  t = tokenize(json{{"content", "hi"}, {"with_pieces", true}});
  ASSERT_TRUE(t.ok());
  ASSERT_FALSE((*t)["tokens"].empty());
  const std::vector<TokenId> hi = tok().Tokenize("hi", false, true);
  ASSERT_EQ((*t)["tokens"].size(), hi.size());
  for (size_t i = 0; i < hi.size(); ++i) {
    EXPECT_EQ((*t)["tokens"][i]["id"], hi[i]);
    // Valid UTF-8 comes as a string, a partial character as its bytes.
    const std::string piece(tok().TokenToPiece(hi[i], true));
    const json& got = (*t)["tokens"][i]["piece"];
    if (got.is_array()) {
      EXPECT_EQ(got, json(std::vector<uint8_t>(piece.begin(), piece.end())));
    } else {
      EXPECT_EQ(got, piece);
    }
  }
  t = tokenize(json{{"content", ""}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, json::parse(R"({"tokens":[]})"));
  EXPECT_EQ(HandleTokenize(json::object(), tok()).status().reason(),
            "missing_field");
  EXPECT_EQ(HandleTokenize(json{{"content", 1}}, tok()).status().reason(),
            "invalid_field");

  auto d = HandleDetokenize(json{{"tokens", ids}}, tok());
  ASSERT_TRUE(d.ok()) << d.status();
  std::string pieces;
  for (TokenId id : ids) pieces += tok().TokenToPiece(id, true);
  EXPECT_EQ((*d)["content"], pieces);
  EXPECT_EQ(HandleDetokenize(json{{"tokens", "x"}}, tok()).status().reason(),
            "invalid_field");
  EXPECT_EQ(
      HandleDetokenize(json{{"tokens", {100000}}}, tok()).status().reason(),
      "out_of_range");
}

// The one mapping of every API's token limit to n_predict.
TEST(LowerTokenLimitTest, FirstGivenKeyBecomesNPredictUnlessNPredictIs) {
  json fields = json::object();
  ASSERT_TRUE(LowerTokenLimit(json{{"max_completion_tokens", 5},
                                   {"max_tokens", 9}},
                              {"max_completion_tokens", "max_tokens"}, -1,
                              &fields)
                  .ok());
  EXPECT_EQ(fields["n_predict"], 5);
  fields = json::object();
  ASSERT_TRUE(LowerTokenLimit(json{{"n_predict", 3}, {"max_tokens", 9}},
                              {"max_tokens"}, -1, &fields)
                  .ok());
  EXPECT_FALSE(fields.contains("n_predict"));  // the body's own stays
  Status bad = LowerTokenLimit(json{{"max_output_tokens", 0}},
                               {"max_output_tokens"}, 1, &fields);
  EXPECT_EQ(bad.reason(), "out_of_range");
  EXPECT_NE(bad.message().find("max_output_tokens"), std::string_view::npos);
  bad = LowerTokenLimit(json{{"max_tokens", "7"}}, {"max_tokens"}, 1, &fields);
  EXPECT_EQ(bad.message(),
            "field 'max_tokens': expected an integer, got string \"7\"");
}

}  // namespace
}  // namespace kvault
