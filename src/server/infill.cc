#include "server/infill.h"

#include <algorithm>
#include <string>

#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

// Unimplemented naming every FIM token the vocabulary lacks, as llama-server.
Status CheckFimTokens(const Vocab& vocab) {
  std::string missing;
  if (!vocab.fim_pre) missing += "prefix token is missing. ";
  if (!vocab.fim_suf) missing += "suffix token is missing. ";
  if (!vocab.fim_mid) missing += "middle token is missing. ";
  if (missing.empty()) return Status::Ok();
  return UnimplementedError("Infill is not supported by this model: " +
                            missing)
      .WithReason(kReasonInfillUnsupported);
}

// input_prefix / input_suffix: text (special tokens not parsed) or a mixed
// array of ids and texts.
StatusOr<std::vector<TokenId>> ReadCodePart(const json& body, const char* key,
                                            const Tokenizer& tokenizer) {
  const json* v = FindField(body, key);
  if (v == nullptr) return std::vector<TokenId>();
  if (v->is_string()) {
    return tokenizer.Tokenize(v->get_ref<const std::string&>(), false, false);
  }
  return TokenizePrompt(*v, tokenizer, false, key);
}

void Append(std::vector<TokenId>* out, const std::vector<TokenId>& more) {
  out->insert(out->end(), more.begin(), more.end());
}

// The repository context: [FIM_REP]myproject\n, then each chunk after a
// [FIM_SEP]filename\n line (or a plain-text separator when the vocabulary
// has none), then the current file's [FIM_SEP] line.
StatusOr<std::vector<TokenId>> ExtraContext(const json& body,
                                            const Tokenizer& tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  std::vector<TokenId> out;
  if (vocab.fim_rep) {
    out.push_back(*vocab.fim_rep);
    Append(&out, tokenizer.Tokenize("myproject\n", false, false));
  }
  const json* extra = FindField(body, "input_extra");
  if (extra != nullptr && !extra->is_array()) {
    return WrongType("input_extra", "an array of {filename, text}", *extra);
  }
  for (size_t i = 0; extra != nullptr && i < extra->size(); ++i) {
    const json& chunk = (*extra)[i];
    const std::string name = "input_extra[" + std::to_string(i) + "]";
    if (!chunk.is_object()) return WrongType(name, "an object", chunk);
    std::string text, filename = "tmp";
    KV_RETURN_IF_ERROR(ReadString(chunk, "text", &text));
    KV_RETURN_IF_ERROR(ReadString(chunk, "filename", &filename));
    if (vocab.fim_sep) {
      out.push_back(*vocab.fim_sep);
      Append(&out, tokenizer.Tokenize(filename + "\n", false, false));
    } else {
      Append(&out, tokenizer.Tokenize("\n\n--- snippet ---\n\n", false, false));
    }
    Append(&out, tokenizer.Tokenize(text, false, false));
  }
  if (vocab.fim_sep) {
    out.push_back(*vocab.fim_sep);
    Append(&out, tokenizer.Tokenize("filename\n", false, false));
  }
  return out;
}

}  // namespace

StatusOr<CompletionRequest> ParseInfillRequest(const json& body,
                                               const Tokenizer& tokenizer,
                                               const CompletionLimits& limits,
                                               const InfillShape& shape) {
  const Vocab& vocab = tokenizer.vocab();
  KV_RETURN_IF_ERROR(CheckFimTokens(vocab));
  CompletionRequest request;
  KV_RETURN_IF_ERROR(ParseGenerationFields(body, limits, &request));
  std::vector<TokenId> middle;
  if (const json* p = FindField(body, "prompt")) {
    KV_ASSIGN_OR_RETURN(middle, TokenizePrompt(*p, tokenizer, false, "prompt"));
  }
  KV_ASSIGN_OR_RETURN(std::vector<TokenId> prefix,
                      ReadCodePart(body, "input_prefix", tokenizer));
  KV_ASSIGN_OR_RETURN(std::vector<TokenId> suffix,
                      ReadCodePart(body, "input_suffix", tokenizer));
  KV_ASSIGN_OR_RETURN(std::vector<TokenId> extra, ExtraContext(body, tokenizer));

  const int64_t n_batch = shape.n_batch;
  const int64_t take_prefix =
      std::min<int64_t>(prefix.size(), 3 * (n_batch / 4));
  const int64_t take_suffix = std::min<int64_t>(
      suffix.size(),
      std::max<int64_t>(0, n_batch / 4 - (2 + int64_t(middle.size()))));
  const int64_t take_extra = std::min<int64_t>(
      std::max<int64_t>(0, int64_t{shape.n_ctx} - n_batch -
                               2 * int64_t{shape.n_predict}),
      extra.size());
  prefix.erase(prefix.begin(), prefix.end() - take_prefix);
  suffix.resize(take_suffix);
  prefix.insert(prefix.begin(), *vocab.fim_pre);
  Append(&prefix, middle);
  suffix.insert(suffix.begin(), *vocab.fim_suf);

  std::vector<TokenId>& first = shape.spm ? suffix : prefix;
  std::vector<TokenId>& second = shape.spm ? prefix : suffix;
  std::vector<TokenId>& prompt = request.params.prompt;
  prompt.assign(extra.end() - take_extra, extra.end());
  if (vocab.add_bos && vocab.bos) prompt.push_back(*vocab.bos);
  Append(&prompt, first);
  Append(&prompt, second);
  prompt.push_back(*vocab.fim_mid);
  return request;
}

}  // namespace kvault
