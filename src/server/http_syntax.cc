#include "server/http_syntax.h"

#include <cstdio>

namespace kvault {

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9')) {
    return true;
  }
  static constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return kSymbols.find(c) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

std::vector<std::string> SplitList(std::string_view value) {
  std::vector<std::string> out;
  while (true) {
    const size_t comma = value.find(',');
    std::string_view item = TrimOws(value.substr(0, comma));
    if (!item.empty()) {
      std::string lower(item);
      for (char& c : lower) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      out.push_back(std::move(lower));
    }
    if (comma == std::string_view::npos) return out;
    value.remove_prefix(comma + 1);
  }
}

Status ParseFieldLine(std::string_view line, std::string_view where,
                      std::string* name, std::string* value) {
  auto fail = [&](const std::string& why) {
    return InvalidArgumentError(std::string(where) + " line " + Excerpt(line) +
                                ": " + why)
        .WithReason(kReasonInvalidHeader);
  };
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
    return fail("obs-fold (a line starting with whitespace) is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail("expected 'name: value'");
  const std::string_view field = line.substr(0, colon);
  if (!IsToken(field)) {
    return fail("the field name must be a token directly followed by ':'");
  }
  const std::string_view raw = TrimOws(line.substr(colon + 1));
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return fail("control character in the value");
    }
  }
  *name = std::string(field);
  *value = std::string(raw);
  return Status::Ok();
}

std::string Excerpt(std::string_view text) {
  constexpr size_t kMax = 60;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u < 0x20 || u >= 0x7f || u == '\'' || u == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += text[i];
    }
  }
  out += text.size() > kMax ? "'..." : "'";
  return out;
}

}  // namespace kvault
