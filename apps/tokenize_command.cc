// `kvault tokenize` and `kvault detokenize`: a GGUF file's tokenizer on the
// command line (vocab-only GGUF files work).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/status_or.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace kvault::apps {
namespace {

constexpr const char kTokenizeUsage[] =
    "usage: kvault tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] "
    "TEXT...\n"
    "  prints the token ids of TEXT (words joined by one space), space\n"
    "  separated on one line.\n"
    "  --no-bos   do not add the BOS/EOS tokens the vocabulary asks for\n"
    "  --special  parse control tokens written in TEXT (e.g. <s>)\n"
    "  --pieces   also print one line per token: id and its piece\n"
    "  put -- before a TEXT that starts with '-'\n";

constexpr const char kDetokenizeUsage[] =
    "usage: kvault detokenize -m FILE.gguf [--special] ID...\n"
    "  prints the text of the token ids.\n"
    "  --special  render control tokens (e.g. <s>) instead of dropping them\n";

struct Options {
  std::string model;
  bool no_bos = false;
  bool special = false;
  bool pieces = false;
  bool help = false;
  std::vector<std::string> positional;
};

// Parses the shared flags; after "--" everything is positional.
StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a.empty() || a[0] != '-' || a == "-") {
      o.positional.push_back(a);
    } else if (a == "--") {
      flags_done = true;
    } else if (a == "-m" || a == "--model") {
      if (i + 1 == args.size()) return InvalidArgumentError(a + " needs FILE");
      o.model = args[++i];
    } else if (a.rfind("--model=", 0) == 0) {
      o.model = a.substr(8);
    } else if (a == "--no-bos") {
      o.no_bos = true;
    } else if (a == "--special") {
      o.special = true;
    } else if (a == "--pieces") {
      o.pieces = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else {
      return InvalidArgumentError("unknown flag '" + a + "'");
    }
  }
  if (!o.help && o.model.empty()) {
    return InvalidArgumentError("-m FILE.gguf is required");
  }
  return o;
}

StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(*gguf);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  return tokenizer;
}

// Returns `piece` quoted, with control bytes and bytes >= 0x80 that are not
// part of printable UTF-8 written as \xNN so every token is visible.
std::string Quote(std::string_view piece) {
  std::string out = "'";
  for (unsigned char c : piece) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

int Fail(const Status& status, const char* usage) {
  std::fprintf(stderr, "kvault: %s\n%s", status.ToString().c_str(), usage);
  return 2;
}

}  // namespace

int RunTokenize(const std::vector<std::string>& args) {
  StatusOr<Options> o = ParseOptions(args);
  if (!o.ok()) return Fail(o.status(), kTokenizeUsage);
  if (o->help) {
    std::fputs(kTokenizeUsage, stdout);
    return 0;
  }
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = OpenTokenizer(o->model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "kvault: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  std::string text;
  for (size_t i = 0; i < o->positional.size(); ++i) {
    if (i > 0) text += ' ';
    text += o->positional[i];
  }
  const std::vector<TokenId> ids =
      (*tokenizer)->Tokenize(text, !o->no_bos, o->special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  if (o->pieces) {
    for (TokenId id : ids) {
      std::printf("%6d %s\n", id,
                  Quote((*tokenizer)->TokenToPiece(id, true)).c_str());
    }
  }
  return 0;
}

int RunDetokenize(const std::vector<std::string>& args) {
  StatusOr<Options> o = ParseOptions(args);
  if (!o.ok()) return Fail(o.status(), kDetokenizeUsage);
  if (o->help) {
    std::fputs(kDetokenizeUsage, stdout);
    return 0;
  }
  std::vector<TokenId> ids;
  for (const std::string& arg : o->positional) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(arg, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != arg.size() || id < 0 || id > INT32_MAX) {
      return Fail(InvalidArgumentError("'" + arg + "' is not a token id"),
                  kDetokenizeUsage);
    }
    ids.push_back(static_cast<TokenId>(id));
  }
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = OpenTokenizer(o->model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "kvault: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  for (TokenId id : ids) {
    if (!(*tokenizer)->vocab().Contains(id)) {
      std::fprintf(stderr, "kvault: token id %d is out of range (%zu tokens)\n",
                   id, (*tokenizer)->num_tokens());
      return 1;
    }
  }
  const std::string text =
      (*tokenizer)->Detokenize(ids, /*remove_special=*/false, o->special);
  std::fwrite(text.data(), 1, text.size(), stdout);  // may hold NUL bytes
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace kvault::apps
