// In-process tests of the HTTP server over a real engine and the real
// stories260K model (skipped when the model file is missing).
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "core/cpu_features.h"
#include "model/kernels/kernels.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;

class HttpServerTest : public testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadStoriesOrNull();
    if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
    ServerOptions o;
    o.model_path = StoriesModelPath();
    o.max_body_bytes = 64 << 10;
    o.defaults.n_predict = 1000;
    o.max_connections = 8;
    o.metrics_endpoint = true;
    server_ = std::make_unique<TestServer>(std::move(model), o);
    ASSERT_TRUE(server_->ok());
  }
  TestServer& s() { return *server_; }

  std::unique_ptr<TestServer> server_;
};

json Greedy(json body) {
  body["temperature"] = 0;
  return body;
}

TEST_F(HttpServerTest, HealthPropsModels) {
  auto [code, health] = s().Get("/health");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(health, json({{"status", "ok"}}));
  auto [pcode, props] = s().Get("/props");
  EXPECT_EQ(pcode, 200);
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_EQ(props["demo_model"], false);
  EXPECT_EQ(props["model_path"], StoriesModelPath());
  EXPECT_TRUE(props["chat_template"].is_string());
  EXPECT_TRUE(props["build_info"].is_string());
  // The kernel set that runs (the engine's, by default the best the CPU
  // features in use allow) and those features.
  EXPECT_EQ(props["kernels"], kernels::IsaName(kernels::BestIsa()));
  EXPECT_EQ(props["cpu_features"], CpuFeaturesString(CpuFeaturesInUse()));
  EXPECT_GT(props["default_generation_settings"]["n_ctx"].get<int>(), 0);
  EXPECT_TRUE(props["default_generation_settings"]["params"].is_object());
  auto [mcode, models] = s().Get("/v1/models");
  EXPECT_EQ(mcode, 200);
  EXPECT_EQ(models["data"][0]["id"], "stories260K.gguf");
}

// POST /props needs --props (501 otherwise, as llama-server); kvault can
// change no property while running, so naming one is refused by name.
TEST_F(HttpServerTest, PostPropsChangesNothingSilently) {
  ExpectError(s().Post("/props", json::object()), 501, "not_supported_error",
              "endpoint_disabled");
  auto model = LoadStoriesOrNull();
  ServerOptions o;
  o.model_path = StoriesModelPath();
  o.props_endpoint = true;
  TestServer with_props(std::move(model), o);
  ASSERT_TRUE(with_props.ok());
  EXPECT_EQ(with_props.Get("/props").second["endpoint_props"], true);
  auto [code, ok] = with_props.Post("/props", json::object());
  EXPECT_EQ(code, 200);
  EXPECT_EQ(ok, json({{"success", true}}));
  auto [bad_code, bad] = with_props.Post("/props", {{"n_ctx", 5}});
  EXPECT_EQ(bad_code, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("'n_ctx'"),
            std::string::npos);
}

TEST_F(HttpServerTest, CompletionNonStreamIsDeterministicAndComplete) {
  json body = Greedy({{"prompt", "Once upon a time"},
                      {"n_predict", 12},
                      {"return_tokens", true},
                      {"id_slot", 1}});
  auto [code, a] = s().Post("/completion", body);
  ASSERT_EQ(code, 200) << a.dump();
  EXPECT_TRUE(a["content"].is_string());
  EXPECT_EQ(a["id_slot"], 1);
  EXPECT_EQ(a["stop"], true);
  EXPECT_LE(a["tokens_predicted"].get<int>(), 12);
  EXPECT_EQ(a["tokens"].size(), a["tokens_predicted"].get<size_t>());
  for (const char* key : {"stop_type", "stopping_word", "tokens_evaluated",
                          "tokens_cached", "truncated"}) {
    EXPECT_TRUE(a.contains(key)) << key;
  }
  for (const char* key :
       {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
        "predicted_n", "predicted_ms", "predicted_per_token_ms",
        "predicted_per_second", "cache_n"}) {
    EXPECT_TRUE(a["timings"].contains(key)) << key;
  }
  auto [code2, b] = s().Post("/completion", body);
  ASSERT_EQ(code2, 200);
  EXPECT_EQ(b["content"], a["content"]);
  EXPECT_EQ(b["tokens"], a["tokens"]);
}

TEST_F(HttpServerTest, CompletionStreamMatchesNonStream) {
  json body = Greedy({{"prompt", "The little dog"}, {"n_predict", 16}});
  auto [code, whole] = s().Post("/completion", body);
  ASSERT_EQ(code, 200);
  body["stream"] = true;
  auto res = s().client().Post("/completion", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"),
            std::string::npos);
  std::vector<std::string> payloads = SsePayloads(res->body);
  ASSERT_FALSE(payloads.empty());
  std::string text;
  for (size_t i = 0; i < payloads.size(); ++i) {
    json e = json::parse(payloads[i]);
    text += e["content"].get<std::string>();
    EXPECT_EQ(e["stop"], i + 1 == payloads.size()) << payloads[i];
    EXPECT_GE(e["id_slot"].get<int>(), 0) << payloads[i];
  }
  json last = json::parse(payloads.back());
  EXPECT_TRUE(last["timings"].is_object());
  EXPECT_EQ(last["tokens_predicted"], whole["tokens_predicted"]);
  EXPECT_EQ(text, whole["content"].get<std::string>());
}

TEST_F(HttpServerTest, OpenAiCompletionsAndChat) {
  auto [code, c] = s().Post("/v1/completions",
                            Greedy({{"prompt", "Once"}, {"max_tokens", 6}}));
  ASSERT_EQ(code, 200) << c.dump();
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_TRUE(c["choices"][0]["text"].is_string());
  EXPECT_LE(c["usage"]["completion_tokens"].get<int>(), 6);

  json chat = Greedy({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                      {"max_tokens", 6}});
  auto [ccode, reply] = s().Post("/v1/chat/completions", chat);
  ASSERT_EQ(ccode, 200) << reply.dump();
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");

  chat["stream"] = true;
  auto res = s().client().Post("/v1/chat/completions", chat.dump(),
                               "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  std::vector<std::string> p = SsePayloads(res->body);
  ASSERT_GE(p.size(), 3u);
  EXPECT_EQ(p.back(), "[DONE]");
  EXPECT_EQ(res->body.substr(res->body.size() - 14), "data: [DONE]\n\n");
  std::string text;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    json chunk = json::parse(p[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) {
      text += delta["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, reply["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_FALSE(
      json::parse(p[p.size() - 2])["choices"][0]["finish_reason"].is_null());
}

TEST_F(HttpServerTest, RequestErrors) {
  ExpectError(s().PostRaw("/completion", "{\"prompt\": "), 400,
              "invalid_request_error", "malformed_json");
  ExpectError(s().PostRaw("/completion", "{\"prompt\": \"\xff\"}"), 400,
              "invalid_request_error", "invalid_utf8");
  auto wrong = s().Post("/completion", {{"prompt", "x"}, {"n_predict", "5"}});
  ExpectError(wrong, 400, "invalid_request_error", "invalid_field");
  EXPECT_EQ(wrong.second["error"]["message"],
            "field 'n_predict': expected an integer, got string \"5\"");
  ExpectError(s().Post("/completion", {{"prompt", "x"}, {"n_predict", -2}}),
              400, "invalid_request_error", "out_of_range");
  ExpectError(s().Post("/completion", {{"prompt", "x"}, {"id_slot", 2}}), 400,
              "invalid_request_error", "slot_out_of_range");
  auto [long_code, too_long] =
      s().Post("/completion", {{"prompt", json(std::vector<int>(1100, 5))}});
  EXPECT_EQ(long_code, 400);
  EXPECT_EQ(too_long["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(too_long["error"]["n_prompt_tokens"], 1100);
  EXPECT_GT(too_long["error"]["n_ctx"].get<int>(), 0);
  EXPECT_EQ(too_long["reason"], "prompt_too_long");
  ExpectError(s().Get("/nope"), 404, "not_found_error", "no_such_route");
  ExpectError(s().PostRaw("/completion", std::string(70 << 10, ' ')), 413,
              "invalid_request_error", "body_too_large");
  // The server still answers after all of that.
  EXPECT_EQ(s().Get("/health").first, 200);
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIs413) {
  size_t sent = 0;
  const size_t total = 256 << 10;  // 4x the limit
  auto res = s().client().Post(
      "/completion",
      [&sent, total](size_t, httplib::DataSink& sink) {
        const std::string piece(8 << 10, ' ');
        if (sent >= total) {
          sink.done();
          return true;
        }
        sent += piece.size();
        return sink.write(piece.data(), piece.size());
      },
      "application/json");
  if (res) {
    EXPECT_EQ(res->status, 413) << res->body << " sent " << sent;
  }  // else the server hung up on the oversized body, also a refusal
  EXPECT_EQ(s().Get("/health").first, 200);
}

TEST_F(HttpServerTest, TokenizeDetokenizeRoundTrip) {
  auto [code, t] = s().Post("/tokenize", {{"content", "Once upon a time"}});
  ASSERT_EQ(code, 200);
  ASSERT_FALSE(t["tokens"].empty());
  auto [dcode, d] = s().Post("/detokenize", {{"tokens", t["tokens"]}});
  ASSERT_EQ(dcode, 200);
  // llama-server keeps SentencePiece's leading space.
  EXPECT_EQ(d["content"], " Once upon a time");
  auto [pcode, pieces] =
      s().Post("/tokenize", {{"content", "Once"}, {"with_pieces", true}});
  ASSERT_EQ(pcode, 200);
  EXPECT_TRUE(pieces["tokens"][0].contains("piece"));
}

TEST_F(HttpServerTest, SlotsMetricsKv) {
  ASSERT_EQ(
      s().Post("/completion",
               Greedy({{"prompt", "Once"}, {"n_predict", 4}, {"id_slot", 0}}))
          .first,
      200);
  auto [code, slots] = s().Get("/slots");
  ASSERT_EQ(code, 200);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0]["id"], 0);
  EXPECT_GT(slots[0]["n_cached"].get<int>(), 0);
  EXPECT_FALSE(slots[0]["is_processing"].get<bool>());

  auto res = s().client().Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("llamacpp:prompt_tokens_total "), std::string::npos);
  EXPECT_NE(res->body.find("kvault_kv_cells_used "), std::string::npos);
  EXPECT_EQ(res->body.find("kvault_requests_total 0\n"), std::string::npos);

  auto [kcode, kv] = s().Get("/kv");
  ASSERT_EQ(kcode, 200);
  EXPECT_EQ(kv["pool"]["num_cells"], 1024);
  EXPECT_EQ(kv["page_slot"].size(), kv["num_pages"]);
  EXPECT_EQ(kv["map"].get<std::string>().size(), kv["num_pages"]);
  EXPECT_NE(kv["map"].get<std::string>().find('0'), std::string::npos);
  auto [dcode, defrag] = s().Post("/kv/defrag", json::object());
  ASSERT_EQ(dcode, 200) << defrag.dump();
  EXPECT_TRUE(defrag.contains("cells_moved"));
}

// Polls /slots until slot `id` is idle (bounded); returns its entry.
json WaitIdle(TestServer& s, int id) {
  json slot;
  for (int i = 0; i < 2000; ++i) {
    slot = s.Get("/slots").second[id];
    if (!slot["is_processing"].get<bool>()) return slot;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "slot " << id << " still busy: " << slot.dump();
  return slot;
}

TEST_F(HttpServerTest, ClientClosingMidStreamFreesTheSlot) {
  const int n_predict = 1000;  // most of the slot context
  json body = Greedy({{"prompt", "Once"},
                      {"n_predict", n_predict},
                      {"ignore_eos", true},
                      {"id_slot", 0},
                      {"stream", true}});
  httplib::Request req;
  req.method = "POST";
  req.path = "/completion";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&chunks](const char*, size_t, uint64_t, uint64_t) {
    ++chunks;
    return false;  // hang up after the first piece
  };
  httplib::Client client("127.0.0.1", s().server().port());
  auto res = client.send(req);
  EXPECT_FALSE(res);  // cancelled by us
  EXPECT_EQ(chunks, 1);
  json slot = WaitIdle(s(), 0);
  EXPECT_EQ(slot["next_token"][0]["n_remain"], -1);  // idle: no budget
  EXPECT_LT(s().engine().Slots()[0].n_decoded, uint64_t{n_predict})
      << "the engine generated every token: the disconnect was not noticed";
  auto [code, after] =
      s().Post("/completion",
               Greedy({{"prompt", "Once"}, {"n_predict", 4}, {"id_slot", 0}}));
  EXPECT_EQ(code, 200) << after.dump();
  EXPECT_EQ(after["id_slot"], 0);
}

TEST_F(HttpServerTest, ConcurrentStreamsMatchSerialRuns) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat",
                                            "Lily wanted", "One day"};
  std::vector<std::string> serial;
  for (const std::string& p : prompts) {
    auto [code, r] =
        s().Post("/completion", Greedy({{"prompt", p}, {"n_predict", 24}}));
    ASSERT_EQ(code, 200) << r.dump();
    serial.push_back(r["content"].get<std::string>());
  }
  // More streams than slots: the engine queues the rest.
  std::vector<std::string> streamed(prompts.size());
  std::vector<int> status(prompts.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      httplib::Client client("127.0.0.1", s().server().port());
      json body =
          Greedy({{"prompt", prompts[i]}, {"n_predict", 24}, {"stream", true}});
      auto res = client.Post("/completion", body.dump(), "application/json");
      if (!res) return;
      status[i] = res->status;
      for (const std::string& p : SsePayloads(res->body)) {
        streamed[i] += json::parse(p)["content"].get<std::string>();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(prompts[i]);
    EXPECT_EQ(status[i], 200);
    EXPECT_EQ(streamed[i], serial[i]);
  }
}

TEST_F(HttpServerTest, StopEndsStreamsInFlight) {
  json body = Greedy({{"prompt", "Once"},
                      {"n_predict", 1000},
                      {"ignore_eos", true},
                      {"id_slot", 1},
                      {"stream", true}});
  std::promise<void> first_chunk;
  std::thread client_thread([&] {
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    req.body = body.dump();
    bool signalled = false;
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      if (!signalled) first_chunk.set_value();
      signalled = true;
      return true;
    };
    httplib::Client client("127.0.0.1", s().server().port());
    client.send(req);  // ends when the server stops
  });
  first_chunk.get_future().wait();
  s().server().Stop();  // must not hang on the open stream
  client_thread.join();
  // The engine was told: the slot is not left processing for ever.
  bool idle = false;
  for (int i = 0; i < 2000 && !idle; ++i) {
    idle = !s().engine().Slots()[1].is_processing;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(idle);
  EXPECT_LT(s().engine().Slots()[1].n_decoded, 1000u)
      << "Stop did not cancel the streamed request";
}

// llama-server's chat token count: the prompt the request would run.
TEST_F(HttpServerTest, ChatInputTokensCountsTheRenderedPrompt) {
  const json messages = {{{"role", "system"}, {"content", "Book"}},
                         {{"role", "user"}, {"content", "best book"}}};
  auto [code, count] = s().Post("/chat/completions/input_tokens",
                                {{"messages", messages}});
  ASSERT_EQ(code, 200) << count.dump();
  auto [ccode, chat] = s().Post(
      "/v1/chat/completions",
      Greedy({{"messages", messages}, {"max_tokens", 1}}));
  ASSERT_EQ(ccode, 200) << chat.dump();
  EXPECT_EQ(count["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(s().Post("/v1/chat/completions/input_tokens", json::object())
                .first,
            400);
}

// As llama-server: a prompt list runs one task per prompt and answers a
// list; n asks an OpenAI route for several choices; {"prompt_string"} is a
// prompt too.
TEST_F(HttpServerTest, PromptListsAndChoicesRunSeveralTasks) {
  const json ids = s().engine().model().tokenizer().Tokenize("Once upon", true,
                                                             true);
  auto [code, list] = s().Post(
      "/completion",
      Greedy({{"prompt", {ids, "Once upon"}}, {"n_predict", 4}}));
  ASSERT_EQ(code, 200) << list.dump();
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["content"], list[1]["content"]);
  EXPECT_EQ(list[1]["index"], 1);

  auto [ccode, chat] = s().Post(
      "/v1/chat/completions",
      Greedy({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"max_tokens", 3},
              {"n", 2},
              {"id_slot", 0}}));
  ASSERT_EQ(ccode, 200) << chat.dump();
  ASSERT_EQ(chat["choices"].size(), 2u);
  EXPECT_EQ(chat["choices"][1]["index"], 1);
  EXPECT_EQ(chat["usage"]["completion_tokens"], 6);

  auto [ocode, one] = s().Post(
      "/completion",
      Greedy({{"prompt", {{"prompt_string", "Once upon"}}}, {"n_predict", 4}}));
  ASSERT_EQ(ocode, 200) << one.dump();
  EXPECT_EQ(one["content"], list[0]["content"]);
  ExpectError(s().Post("/completion",
                       {{"prompt", {{"prompt_string", "x"},
                                    {"multimodal_data", {"AAAA"}}}}}),
              400, "invalid_request_error", "unsupported_content");
}

// post_sampling_probs: n_probs reports what the sampler chain left, as
// probabilities ("prob", "top_probs"), never a zero-probability entry.
TEST_F(HttpServerTest, PostSamplingProbsReportTheChainsCandidates) {
  auto [code, r] = s().Post("/completion", {{"prompt", "Once upon a time"},
                                            {"n_predict", 3},
                                            {"n_probs", 5},
                                            {"temperature", 1.0},
                                            {"top_k", 3},
                                            {"seed", 7},
                                            {"post_sampling_probs", true}});
  ASSERT_EQ(code, 200) << r.dump();
  EXPECT_EQ(r["generation_settings"]["post_sampling_probs"], true);
  ASSERT_EQ(r["completion_probabilities"].size(), 3u);
  for (const json& tok : r["completion_probabilities"]) {
    EXPECT_GT(tok["prob"].get<double>(), 0.0);
    EXPECT_LE(tok["prob"].get<double>(), 1.0);
    EXPECT_FALSE(tok.contains("logprob"));
    const json& top = tok["top_probs"];
    ASSERT_FALSE(top.empty());
    EXPECT_LE(top.size(), 3u);  // top_k 3 left at most three
    double sum = 0, last = 2;
    bool chosen_listed = false;
    for (const json& p : top) {
      const double prob = p["prob"];
      EXPECT_GT(prob, 0.0);
      EXPECT_LE(prob, last);
      last = prob;
      sum += prob;
      chosen_listed |= p["id"] == tok["id"];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_TRUE(chosen_listed);
  }
}

TEST_F(HttpServerTest, VerboseChatRepliesCarryTheRenderedPrompt) {
  const json messages = {{{"role", "system"}, {"content", "Book"}},
                         {{"role", "user"}, {"content", "best book"}}};
  for (bool verbose : {true, false}) {
    auto [code, r] = s().Post(
        "/v1/chat/completions",
        Greedy({{"messages", messages}, {"max_tokens", 2}, {"verbose", verbose}}));
    ASSERT_EQ(code, 200) << r.dump();
    EXPECT_EQ(r.contains("__verbose"), verbose);
    if (verbose) {
      const std::string prompt = r["__verbose"]["prompt"];
      EXPECT_NE(prompt.find("Book"), std::string::npos) << prompt;
      EXPECT_NE(prompt.find("best book"), std::string::npos) << prompt;
    }
  }
}

TEST(HttpServerLoadingTest, HealthSaysLoadingUntilSetEngine) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  ServerOptions o;
  o.port = 0;
  auto server = HttpServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  (*server)->SetLoadProgress(0.5);
  auto res = client.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  json j = json::parse(res->body);
  EXPECT_EQ(j["error"], json({{"code", 503},
                              {"message", "Loading model"},
                              {"type", "unavailable_error"}}));
  EXPECT_DOUBLE_EQ(j["progress"].get<double>(), 0.5);
  res = client.Post("/completion", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);

  EngineOptions eo;
  eo.n_ctx_total = 256;
  eo.num_threads = 1;
  auto engine = Engine::Create(std::move(model), eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*server)->SetEngine(engine->get());
  res = client.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body), json({{"status", "ok"}}));
  (*server)->Stop();
  (*server)->Stop();  // idempotent
}

TEST(HttpServerAuthTest, ApiKeyGuardsEverythingButHealth) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  ServerOptions o;
  o.api_keys = {"s3cret"};
  TestServer s(std::move(model), o);
  ASSERT_TRUE(s.ok());
  ExpectError(s.Get("/props"), 401, "authentication_error", "invalid_api_key");
  ExpectError(s.Post("/completion", {{"prompt", "x"}, {"n_predict", 1}}), 401,
              "authentication_error", "invalid_api_key");
  EXPECT_EQ(s.Get("/health").first, 200);
  s.client().set_bearer_token_auth("wrong");
  ExpectError(s.Get("/metrics"), 401, "authentication_error",
              "invalid_api_key");
  s.client().set_bearer_token_auth("s3cret");
  EXPECT_EQ(s.Get("/props").first, 200);
  auto [code, r] =
      s.Post("/completion", Greedy({{"prompt", "x"}, {"n_predict", 2}}));
  EXPECT_EQ(code, 200) << r.dump();
}

TEST(HttpServerAuthTest, AnyOfSeveralKeysAdmits) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  ServerOptions o;
  o.api_keys = {"one", "two"};
  TestServer s(std::move(model), o);
  ASSERT_TRUE(s.ok());
  for (const char* key : {"one", "two"}) {
    s.client().set_bearer_token_auth(key);
    EXPECT_EQ(s.Get("/props").first, 200) << key;
  }
  s.client().set_bearer_token_auth("three");
  ExpectError(s.Get("/props"), 401, "authentication_error", "invalid_api_key");
}

// As llama-server: /metrics needs --metrics, --no-slots turns /slots off;
// both answer 501 naming the flag.
TEST(HttpServerEndpointsTest, DisabledEndpointsAnswer501) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  ServerOptions o;
  o.slots_endpoint = false;
  TestServer s(std::move(model), o);
  ASSERT_TRUE(s.ok());
  auto [mcode, metrics] = s.Get("/metrics");
  EXPECT_EQ(mcode, 501);
  EXPECT_EQ(metrics["error"]["type"], "not_supported_error");
  EXPECT_EQ(metrics["error"]["message"],
            "This server does not support metrics endpoint. Start it with "
            "`--metrics`");
  auto [scode, slots] = s.Get("/slots");
  EXPECT_EQ(scode, 501);
  EXPECT_EQ(slots["error"]["message"],
            "This server does not support slots endpoint. Start it with "
            "`--slots`");
}

}  // namespace
}  // namespace kvault
