#include "model/generator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace kvault {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

Status CheckOptions(const GeneratorOptions& options) {
  if (options.prefill_chunk == 0) {
    return InvalidArgumentError("generator: prefill_chunk must be >= 1");
  }
  return Status::Ok();
}

}  // namespace

double GenerationTimings::prompt_tok_per_s() const {
  return prompt_ms > 0 ? num_prompt_tokens * 1e3 / prompt_ms : 0;
}

double GenerationTimings::gen_tok_per_s() const {
  return gen_ms > 0 ? num_decode_steps * 1e3 / gen_ms : 0;
}

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration:
      return "eog";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kContextFull:
      return "context";
    case StopReason::kCallback:
      return "callback";
  }
  return "?";
}

Generator::Generator(InferenceContext* context, SeqId seq)
    : decode_([context](std::span<const BatchToken> batch) {
        return context->Decode(batch);
      }),
      vocab_(&context->model().tokenizer().vocab()),
      seq_(seq) {}

Generator::Generator(DecodeFn decode, const Vocab* vocab, SeqId seq)
    : decode_(std::move(decode)), vocab_(vocab), seq_(seq) {}

StatusOr<std::vector<float>> Generator::Prefill(
    std::span<const TokenId> tokens, uint32_t chunk) {
  std::vector<float> logits;
  std::vector<BatchToken> batch;  // [<= chunk]
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t end = std::min(tokens.size(), begin + chunk);
    batch.clear();
    for (size_t i = begin; i < end; ++i) {
      batch.push_back({seq_, tokens[i], next_pos_ + static_cast<Pos>(i - begin),
                       /*want_logits=*/i + 1 == tokens.size()});
    }
    StatusOr<std::vector<float>> out = decode_(batch);
    if (!out.ok()) {
      return out.status().WithContext("prefill at position " +
                                      std::to_string(next_pos_));
    }
    next_pos_ += static_cast<Pos>(end - begin);
    logits = *std::move(out);
  }
  return logits;
}

StatusOr<std::vector<float>> Generator::DecodeOne(TokenId token) {
  const BatchToken one{seq_, token, next_pos_, /*want_logits=*/true};
  StatusOr<std::vector<float>> out = decode_(std::span(&one, 1));
  if (!out.ok()) {
    return out.status().WithContext("decode at position " +
                                    std::to_string(next_pos_));
  }
  ++next_pos_;
  pending_.reset();
  return out;
}

StatusOr<GenerationResult> Generator::Generate(
    std::span<const TokenId> prompt, Sampler* sampler,
    const GeneratorOptions& options, const TokenCallback& on_token) {
  KV_RETURN_IF_ERROR(CheckOptions(options));
  std::vector<TokenId> feed;  // the pending token, then the prompt
  if (pending_) feed.push_back(*pending_);
  feed.insert(feed.end(), prompt.begin(), prompt.end());
  if (feed.empty()) {
    return InvalidArgumentError("generator: empty prompt and no pending token");
  }
  if (options.n_ctx > 0 && next_pos_ + feed.size() > options.n_ctx) {
    return InvalidArgumentError(
        "generator: prompt of " + std::to_string(feed.size()) +
        " tokens at position " + std::to_string(next_pos_) +
        " does not fit a context of " + std::to_string(options.n_ctx));
  }
  for (TokenId id : prompt) sampler->Accept(id);

  GenerationResult result;
  GenerationTimings& t = result.timings;
  t.num_prompt_tokens = feed.size();
  const Clock::time_point prefill_start = Clock::now();
  KV_ASSIGN_OR_RETURN(std::vector<float> logits,
                      Prefill(feed, options.prefill_chunk));
  pending_.reset();
  t.prompt_ms = MsSince(prefill_start);

  const Clock::time_point gen_start = Clock::now();
  result.stop = StopReason::kMaxTokens;
  while (result.tokens.size() < options.max_new_tokens) {
    const TokenId token = sampler->Sample(logits);
    if (options.stop_at_eog && vocab_->IsEndOfGeneration(token)) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    sampler->Accept(token);
    result.tokens.push_back(token);
    pending_ = token;
    if (on_token && !on_token(token)) {
      result.stop = StopReason::kCallback;
      break;
    }
    if (result.tokens.size() >= options.max_new_tokens) break;
    if (options.n_ctx > 0 &&
        static_cast<uint32_t>(next_pos_) >= options.n_ctx) {
      result.stop = StopReason::kContextFull;
      break;
    }
    KV_ASSIGN_OR_RETURN(logits, DecodeOne(token));
    ++t.num_decode_steps;
  }
  t.num_generated = result.tokens.size();
  t.gen_ms = MsSince(gen_start);
  return result;
}

}  // namespace kvault
