#include "server/openai_stream.h"

#include <utility>

namespace kvault {

using nlohmann::json;

// --- streamed logprobs ---------------------------------------------------

StreamedLogprobs::StreamedLogprobs(const OaiContext& ctx)
    : tokenizer_(ctx.n_probs > 0 ? ctx.tokenizer : nullptr) {}

void StreamedLogprobs::Add(const TokenEvent& event) {
  if (tokenizer_ != nullptr) {
    entries_.push_back(TokenProbsJson(event, *tokenizer_));
  }
}

void StreamedLogprobs::MoveInto(json& chunk) {
  if (entries_.empty()) return;
  chunk["choices"][0]["logprobs"] = json{{"content", std::move(entries_)}};
  entries_ = json::array();
}

// --- /v1/completions stream ---------------------------------------------

OaiCompletionStreamFormatter::OaiCompletionStreamFormatter(OaiContext ctx)
    : ctx_(std::move(ctx)), logprobs_(ctx_) {}

json OaiCompletionStreamFormatter::Chunk(const std::string& text,
                                         const json& finish_reason) const {
  json choice{{"text", text},
              {"index", 0},
              {"logprobs", nullptr},
              {"finish_reason", finish_reason}};
  return OaiEnvelope("text_completion", ctx_, json::array({std::move(choice)}));
}

std::string OaiCompletionStreamFormatter::Token(const TokenEvent& event,
                                                int /*slot*/) {
  logprobs_.Add(event);
  if (event.text.empty()) return "";
  streamed_ += event.text;
  json chunk = Chunk(event.text, nullptr);
  if (ctx_.timings_per_token) chunk["timings"] = TimingsJson(event.timings);
  logprobs_.MoveInto(chunk);
  return SseData(chunk);
}

std::string OaiCompletionStreamFormatter::Progress(
    const PromptProgress& progress, int /*slot*/) {
  json chunk = Chunk("", nullptr);
  if (ctx_.timings_per_token) chunk["timings"] = TimingsJson(progress.timings);
  chunk["prompt_progress"] = PromptProgressJson(progress);
  return SseData(chunk);
}

std::string OaiCompletionStreamFormatter::Done(const CompletionResult& result) {
  std::string rest;
  if (result.content.compare(0, streamed_.size(), streamed_) == 0) {
    rest = result.content.substr(streamed_.size());
  }
  json last = Chunk(rest, FinishReason(result));
  logprobs_.MoveInto(last);
  last["usage"] = UsageJson(result);
  last["timings"] = TimingsJson(result.timings);
  return SseData(last) + std::string(kSseDone);
}

// --- /v1/chat/completions stream ----------------------------------------

OaiChatStreamFormatter::OaiChatStreamFormatter(OaiContext ctx)
    : ctx_(std::move(ctx)), logprobs_(ctx_) {
  if (ctx_.chat_syntax) reader_.emplace(*ctx_.chat_syntax);
}

std::string OaiChatStreamFormatter::DeltaChunks(const std::vector<json>& deltas,
                                                const TokenEvent* event) {
  std::string out;
  for (const json& delta : deltas) {
    json chunk = Chunk(delta, nullptr);
    if (event != nullptr && ctx_.timings_per_token) {
      chunk["timings"] = TimingsJson(event->timings);
    }
    logprobs_.MoveInto(chunk);
    out += SseData(chunk);
  }
  return out;
}

json OaiChatStreamFormatter::Chunk(json delta,
                                   const json& finish_reason) const {
  json choice{{"index", 0},
              {"delta", std::move(delta)},
              {"finish_reason", finish_reason}};
  return OaiEnvelope("chat.completion.chunk", ctx_,
                     json::array({std::move(choice)}));
}

std::string OaiChatStreamFormatter::RoleChunkOnce() {
  if (sent_role_) return "";
  sent_role_ = true;
  return SseData(
      Chunk(json{{"role", "assistant"}, {"content", nullptr}}, nullptr));
}

std::string OaiChatStreamFormatter::Token(const TokenEvent& event,
                                          int /*slot*/) {
  std::string out = RoleChunkOnce();
  logprobs_.Add(event);
  if (event.text.empty()) return out;
  streamed_ += event.text;
  if (reader_) return out + DeltaChunks(reader_->Feed(event.text), &event);
  return out + DeltaChunks({json{{"content", event.text}}}, &event);
}

std::string OaiChatStreamFormatter::Progress(const PromptProgress& progress,
                                             int /*slot*/) {
  json chunk =
      Chunk(json{{"role", "assistant"}, {"content", nullptr}}, nullptr);
  if (ctx_.timings_per_token) chunk["timings"] = TimingsJson(progress.timings);
  chunk["prompt_progress"] = PromptProgressJson(progress);
  return SseData(chunk);
}

std::string OaiChatStreamFormatter::Done(const CompletionResult& result) {
  std::string out = RoleChunkOnce();
  std::string rest;
  if (result.content.size() > streamed_.size() &&
      result.content.compare(0, streamed_.size(), streamed_) == 0) {
    rest = result.content.substr(streamed_.size());
  }
  std::string finish = FinishReason(result);
  if (reader_) {
    out += DeltaChunks(reader_->Feed(rest), nullptr);
    out += DeltaChunks(reader_->Finish(finish == "length"), nullptr);
    finish = ChatFinishReason(finish, reader_->has_tool_calls());
  } else if (!rest.empty()) {
    out += DeltaChunks({json{{"content", rest}}}, nullptr);
  }
  json last = Chunk(json::object(), finish);
  logprobs_.MoveInto(last);
  if (!ctx_.include_usage) {
    last["timings"] = TimingsJson(result.timings);
    return out + SseData(last) + std::string(kSseDone);
  }
  // OpenAI: usage comes in a chunk of its own, with no choices.
  json usage = OaiEnvelope("chat.completion.chunk", ctx_, json::array());
  usage["usage"] = UsageJson(result);
  usage["timings"] = TimingsJson(result.timings);
  return out + SseData(last) + SseData(usage) + std::string(kSseDone);
}

}  // namespace kvault
