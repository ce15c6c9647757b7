#include "server/openai_codec.h"

#include <gtest/gtest.h>

#include "server/openai_stream.h"
#include "server_test_util.h"

namespace kvault {
namespace {

using nlohmann::json;

class OpenAiCodecTest : public testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel();
    ASSERT_NE(model_, nullptr);
    limits_.defaults.n_predict = 50;
    limits_.n_ctx_slot = 200;
    limits_.n_slots = 1;
    ctx_.id = "chatcmpl-7";
    ctx_.created = 1700000000;
    ctx_.model = "m.gguf";
  }
  const Tokenizer& tok() const { return model_->tokenizer(); }

  std::unique_ptr<LlamaModel> model_;
  CompletionLimits limits_;
  OaiContext ctx_;
};

TEST_F(OpenAiCodecTest, CompletionMapsMaxTokensAndKeepsLlamaFields) {
  auto r = ParseOaiCompletionRequest(
      json{{"prompt", "hi"}, {"max_tokens", 7}, {"top_k", 3}, {"n", 1}}, tok(),
      limits_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.n_predict, 7);
  EXPECT_EQ(r->params.sampling.top_k, 3);
  EXPECT_EQ(r->params.prompt, tok().Tokenize("hi", true, true));
  // n_predict wins over max_tokens.
  r = ParseOaiCompletionRequest(
      json{{"prompt", "hi"}, {"max_tokens", 7}, {"n_predict", 3}}, tok(),
      limits_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params.n_predict, 3);
}

TEST_F(OpenAiCodecTest, CompletionErrors) {
  auto r = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"n", 2}}, tok(),
                                     limits_);
  EXPECT_EQ(r.status().reason(), "unsupported_field");
  r = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"max_tokens", "7"}},
                                tok(), limits_);
  EXPECT_EQ(r.status().message(),
            "field 'max_tokens': expected an integer, got string \"7\"");
  r = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"max_tokens", -2}},
                                tok(), limits_);
  EXPECT_EQ(r.status().reason(), "out_of_range");
  // Above the server's -n: the request's own budget wins, as in
  // llama-server.
  r = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"max_tokens", 51}},
                                tok(), limits_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.n_predict, 51);
}

// OpenAI logprobs become n_probs as llama-server maps them.
TEST_F(OpenAiCodecTest, LogprobsMapToNProbs) {
  auto c = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"logprobs", 3}},
                                     tok(), limits_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.n_probs, 3u);
  c = ParseOaiCompletionRequest(json{{"prompt", "hi"}, {"logprobs", true}},
                                tok(), limits_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->params.n_probs, 1u);
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto chat = ParseOaiChatRequest(
      json{{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 2}}, tok(),
      limits_, ChatTemplateFamily::kChatml);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->params.n_probs, 2u);
  chat = ParseOaiChatRequest(json{{"messages", msgs}, {"logprobs", false}},
                             tok(), limits_, ChatTemplateFamily::kChatml);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->params.n_probs, 0u);
  chat = ParseOaiChatRequest(json{{"messages", msgs}, {"top_logprobs", 2}},
                             tok(), limits_, ChatTemplateFamily::kChatml);
  EXPECT_EQ(chat.status().message(),
            "field 'top_logprobs' requires 'logprobs' to be true");
}

TEST_F(OpenAiCodecTest, ChatMessagesStringAndPartsContent) {
  json body{{"messages",
             {{{"role", "system"}, {"content", "be brief"}},
              {{"role", "user"},
               {"content",
                {{{"type", "text"}, {"text", "a"}},
                 {{"type", "text"}, {"text", "b"}}}}},
              {{"role", "assistant"}, {"content", nullptr}}}}};
  auto m = ParseChatMessages(body);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].role, "system");
  EXPECT_EQ((*m)[0].content, "be brief");
  EXPECT_EQ((*m)[1].content, "a\nb");
  EXPECT_EQ((*m)[2].content, "");
}

TEST_F(OpenAiCodecTest, ChatMessageErrors) {
  struct Case {
    json body;
    std::string reason;
    std::string needle;
  };
  const Case cases[] = {
      {json::object(), "missing_field", "'messages' is required"},
      {{{"messages", json::array()}}, "invalid_field", "non-empty array"},
      {{{"messages", "hi"}}, "invalid_field", "got string"},
      {{{"messages", {1}}}, "invalid_field", "messages[0]"},
      {{{"messages", {{{"content", "x"}}}}},
       "invalid_field",
       "messages[0].role"},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}},
       "invalid_field",
       "messages[0].content"},
      {{{"messages",
         {{{"role", "user"},
           {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}},
       "unsupported_content",
       "image_url"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
       "invalid_field",
       "messages[0].content[0].text"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    auto m = ParseChatMessages(c.body);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().reason(), c.reason);
    EXPECT_NE(m.status().message().find(c.needle), std::string_view::npos)
        << m.status().message();
  }
}

TEST_F(OpenAiCodecTest, ChatRendersTemplateAndAddsStopStrings) {
  json body{{"messages", {{{"role", "user"}, {"content", "hello"}}}},
            {"max_completion_tokens", 5},
            {"stop", "zz"}};
  auto r =
      ParseOaiChatRequest(body, tok(), limits_, ChatTemplateFamily::kChatml);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<ChatMessage> msgs = {{"user", "hello"}};
  auto text =
      RenderChat(ChatTemplateFamily::kChatml, msgs, true, "<s>", "</s>");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(r->params.prompt, tok().Tokenize(*text, true, true));
  EXPECT_EQ(r->params.n_predict, 5);
  ASSERT_FALSE(r->params.stop.empty());
  EXPECT_EQ(r->params.stop[0], "zz");
  for (const std::string& s : ChatStopStrings(ChatTemplateFamily::kChatml)) {
    EXPECT_NE(std::find(r->params.stop.begin(), r->params.stop.end(), s),
              r->params.stop.end())
        << s;
  }
  body["messages"][0]["role"] = "wizard";
  r = ParseOaiChatRequest(body, tok(), limits_, ChatTemplateFamily::kChatml);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// Regression (issue 41): a template that writes bos_token (Llama 3.x,
// Mistral, Gemma, Phi, ...) gave a prompt starting with two BOS, the
// template's and the tokenizer's. As llama-server, the prompt holds one,
// and /apply-template shows the text that is tokenized.
TEST_F(OpenAiCodecTest, ATemplateWritingBosGivesOneBos) {
  const Vocab& vocab = tok().vocab();
  ASSERT_TRUE(vocab.add_bos && vocab.bos.has_value());
  StatusOr<ChatFormat> format = ChatFormat::FromJinja(
      "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}");
  ASSERT_TRUE(format.ok()) << format.status();
  const json msgs = json::array({{{"role", "user"}, {"content", "hello"}}});
  auto r = ParseOaiChatRequest(json{{"messages", msgs}}, tok(), limits_,
                               *format);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.prompt, tok().Tokenize("[hello]", true, true));
  ASSERT_GE(r->params.prompt.size(), 2u);
  EXPECT_EQ(r->params.prompt[0], *vocab.bos);
  EXPECT_NE(r->params.prompt[1], *vocab.bos);
  auto applied = ApplyTemplate(json{{"messages", msgs}}, nullptr, tok(),
                               *format);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["prompt"], "[hello]");
}

// Regression (issue 41 item 3): "developer" reached the template as is,
// unknown roles were accepted, and text parts reached a Jinja template as a
// list it printed as a Python repr.
TEST_F(OpenAiCodecTest, MessagesAreFittedToTheTemplate) {
  auto render = [&](const std::string& source, const json& messages) {
    StatusOr<ChatFormat> format = ChatFormat::FromJinja(source);
    EXPECT_TRUE(format.ok()) << format.status();
    const json body{{"messages", messages}};
    const nlohmann::ordered_json ordered =
        nlohmann::ordered_json::parse(body.dump());
    return ApplyTemplate(body, &ordered, tok(), *format);
  };
  const std::string plain =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  const json messages = {
      {{"role", "developer"}, {"content", "Be brief"}},
      {{"role", "user"},
       {"content",
        {{{"type", "text"}, {"text", "one"}}, {{"type", "text"}, {"text", "two"}}}}}};
  auto r = render(plain, messages);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["prompt"], "<system>Be brief<user>one\ntwo");
  // A template that knows the role (GPT-OSS's names it) gets it as is.
  r = render("{# developer #}" + plain, messages);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["prompt"], "<developer>Be brief<user>one\ntwo");
  // A template that renders only typed parts gets them, strings included.
  const std::string typed =
      "{% for m in messages %}<{{ m.role }}>{% for p in m.content %}"
      "{{ p.text }};{% endfor %}{% endfor %}";
  StatusOr<ChatFormat> typed_format = ChatFormat::FromJinja(typed);
  ASSERT_TRUE(typed_format.ok());
  EXPECT_TRUE(typed_format->requires_typed_content());
  EXPECT_FALSE(ChatFormat::FromJinja(plain)->requires_typed_content());
  r = render(typed, messages);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["prompt"], "<system>Be brief;<user>one;two;");
  for (const char* role : {"wizard", "bogus", "function", ""}) {
    auto bad = render(plain, {{{"role", role}, {"content", "x"}}});
    EXPECT_EQ(bad.status().reason(), "unknown_role") << role;
    EXPECT_NE(bad.status().message().find("messages[0].role"),
              std::string::npos);
  }
}

TEST_F(OpenAiCodecTest, ChatGenerationPromptFields) {
  const json messages = {{{"role", "user"}, {"content", "hello"}},
                         {{"role", "assistant"}, {"content", "Hi"}}};
  auto parse = [&](json extra) {
    json body{{"messages", messages}};
    body.update(extra);
    return ParseOaiChatRequest(body, tok(), limits_,
                               ChatTemplateFamily::kChatml);
  };
  auto without = parse({{"add_generation_prompt", false}});
  ASSERT_TRUE(without.ok()) << without.status();
  std::vector<ChatMessage> msgs = {{"user", "hello"}, {"assistant", "Hi"}};
  auto text =
      RenderChat(ChatTemplateFamily::kChatml, msgs, false, "<s>", "</s>");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(without->params.prompt, tok().Tokenize(*text, true, true));
  EXPECT_EQ(parse({{"add_generation_prompt", true},
                   {"continue_final_message", true}})
                .status()
                .reason(),
            "invalid_field");
  // Continuing the final assistant message: the prompt is the turns before
  // it with the assistant turn opened, then its text.
  std::vector<ChatMessage> before = {{"user", "hello"}};
  auto opened =
      RenderChat(ChatTemplateFamily::kChatml, before, true, "<s>", "</s>");
  ASSERT_TRUE(opened.ok());
  const std::vector<TokenId> continued = tok().Tokenize(*opened + "Hi", true, true);
  auto cont = parse({{"add_generation_prompt", false},
                     {"continue_final_message", true}});
  ASSERT_TRUE(cont.ok()) << cont.status();
  EXPECT_EQ(cont->params.prompt, continued);
  // llama-server's --prefill-assistant (default on) does the same for a
  // final assistant message under add_generation_prompt.
  auto prefill = parse(json::object());
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(prefill->params.prompt, continued);
  limits_.chat_output.prefill_assistant = false;  // --no-prefill-assistant
  auto closed = parse(json::object());
  ASSERT_TRUE(closed.ok()) << closed.status();
  auto closed_text =
      RenderChat(ChatTemplateFamily::kChatml, msgs, true, "<s>", "</s>");
  ASSERT_TRUE(closed_text.ok());
  EXPECT_EQ(closed->params.prompt, tok().Tokenize(*closed_text, true, true));
  // Nothing to continue: named.
  json user_only{{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                 {"continue_final_message", true}};
  EXPECT_EQ(ParseOaiChatRequest(user_only, tok(), limits_,
                                ChatTemplateFamily::kChatml)
                .status()
                .reason(),
            "invalid_messages");
}

TEST_F(OpenAiCodecTest, TwoAssistantMessagesAtTheEndAreRefused) {
  json body{{"messages",
             {{{"role", "user"}, {"content", "a"}},
              {{"role", "assistant"}, {"content", "b"}},
              {{"role", "assistant"}, {"content", "c"}}}}};
  auto r = ParseChatMessages(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "invalid_messages");
  body["messages"].push_back({{"role", "user"}, {"content", "d"}});
  EXPECT_TRUE(ParseChatMessages(body).ok());
}

CompletionResult Result(const std::string& stop_type) {
  CompletionResult r;
  r.content = "abc";
  r.stop_type = stop_type;
  r.tokens_predicted = 3;
  r.tokens_evaluated = 4;
  return r;
}

TEST_F(OpenAiCodecTest, NonStreamedObjects) {
  json c = OaiCompletionJson(Result("eos"), ctx_);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["id"], "chatcmpl-7");
  EXPECT_EQ(c["created"], 1700000000);
  EXPECT_EQ(c["model"], "m.gguf");
  EXPECT_EQ(c["choices"][0]["text"], "abc");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"], json({{"prompt_tokens", 4},
                              {"completion_tokens", 3},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(c["system_fingerprint"].get<std::string>().substr(0, 1), "b");
  json chat = OaiChatJson(Result("limit"), ctx_);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"],
            json({{"role", "assistant"}, {"content", "abc"}}));
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  CompletionResult truncated = Result("none");
  truncated.truncated = true;
  EXPECT_EQ(FinishReason(truncated), "length");
  EXPECT_EQ(FinishReason(Result("word")), "stop");
}

// Returns the payloads of an SSE stream, "[DONE]" as a string.
std::vector<std::string> Payloads(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    EXPECT_EQ(text.compare(pos, 6, "data: "), 0);
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated event: " << text.substr(pos);
      break;
    }
    out.push_back(text.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

TEST_F(OpenAiCodecTest, ChatStreamFraming) {
  OaiChatStreamFormatter f(ctx_);
  TokenEvent a;
  a.text = "ab";
  std::string text = f.Token(a, 0);  // separate statements: call order
  text += f.Token(TokenEvent{}, 0);
  text += f.Done(Result("eos"));  // "c" was held back
  std::vector<std::string> p = Payloads(text);
  ASSERT_EQ(p.size(), 5u);
  json role = json::parse(p[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(json::parse(p[1])["choices"][0]["delta"]["content"], "ab");
  EXPECT_EQ(json::parse(p[2])["choices"][0]["delta"]["content"], "c");
  json last = json::parse(p[3]);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["timings"].is_object());
  EXPECT_FALSE(last.contains("usage"));  // only with include_usage
  EXPECT_EQ(p[4], "[DONE]");
  EXPECT_EQ(text.substr(text.size() - 14), "data: [DONE]\n\n");
}

// stream_options.include_usage: the finish chunk, then a chunk of usage
// with no choices (as OpenAI and llama-server send it).
TEST_F(OpenAiCodecTest, ChatStreamIncludeUsageEndsWithAUsageChunk) {
  OaiContext ctx = ctx_;
  ctx.include_usage = true;
  OaiChatStreamFormatter f(ctx);
  std::vector<std::string> p = Payloads(f.Done(Result("eos")));
  ASSERT_GE(p.size(), 3u);
  json finish = json::parse(p[p.size() - 3]);
  json usage = json::parse(p[p.size() - 2]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(finish.contains("usage"));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  EXPECT_EQ(p.back(), "[DONE]");
}

TEST_F(OpenAiCodecTest, ChatStreamWithNoTokensStillSendsRole) {
  OaiChatStreamFormatter f(ctx_);
  CompletionResult r = Result("eos");
  r.content = "";
  std::vector<std::string> p = Payloads(f.Done(r));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(json::parse(p[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(p[2], "[DONE]");
}

TEST_F(OpenAiCodecTest, CompletionStreamFraming) {
  OaiCompletionStreamFormatter f(ctx_);
  TokenEvent a;
  a.text = "ab";
  std::string text = f.Token(a, 0);
  text += f.Done(Result("limit"));
  std::vector<std::string> p = Payloads(text);
  ASSERT_EQ(p.size(), 3u);
  json first = json::parse(p[0]);
  EXPECT_EQ(first["object"], "text_completion");
  EXPECT_EQ(first["choices"][0]["text"], "ab");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  json last = json::parse(p[1]);
  EXPECT_EQ(last["choices"][0]["text"], "c");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(p[2], "[DONE]");
}

TEST_F(OpenAiCodecTest, Models) {
  OaiModelInfo info;
  info.id = "stories260K.gguf";
  info.n_vocab = 512;
  json j = OaiModelsJson(info);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "stories260K.gguf");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["meta"]["n_vocab"], 512);
}

TEST_F(OpenAiCodecTest, LogprobsInRepliesAndChunks) {
  TokenEvent e;
  e.token = tok().Tokenize("hi", false, false).at(0);
  e.probs = {{e.token, -0.5f}, {e.token + 1, -1.5f}};
  OaiContext ctx = ctx_;
  ctx.n_probs = 2;
  ctx.tokenizer = &tok();
  json chat = OaiChatJson(Result("limit"), ctx, {e});
  const json& entry = chat["choices"][0]["logprobs"]["content"].at(0);
  EXPECT_EQ(entry["id"], e.token);
  EXPECT_EQ(entry["top_logprobs"].size(), 2u);
  EXPECT_TRUE(OaiCompletionJson(Result("eos"), ctx_)["choices"][0]["logprobs"]
                  .is_null());
  OaiChatStreamFormatter f(ctx);
  e.text = "hi";
  std::string text = f.Token(e, 0);
  json chunk = json::parse(text.substr(text.rfind("data: ") + 6));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"].size(), 1u);
}

TEST_F(OpenAiCodecTest, ApplyTemplateRendersWithoutTokenizing) {
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto out = ApplyTemplate(json{{"messages", msgs}}, nullptr, tok(),
                           ChatTemplateFamily::kChatml);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["prompt"],
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  out = ApplyTemplate(json{{"messages", msgs}, {"add_generation_prompt", false}}, nullptr,
                      tok(), ChatTemplateFamily::kChatml);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["prompt"], "<|im_start|>user\nhi<|im_end|>\n");
  EXPECT_FALSE(ApplyTemplate(json::object(), nullptr, tok(), ChatTemplateFamily::kChatml)
                   .ok());
}

}  // namespace
}  // namespace kvault
