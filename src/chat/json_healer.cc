#include "chat/json_healer.h"

#include <algorithm>
#include <vector>

#include "chat/scanner.h"

namespace kvault::chat {
namespace {

// Plain ASCII, so a dump writes it as it is; a model writing it verbatim
// only shortens what a stream shows until the call is complete.
constexpr std::string_view kMarker = "kvault-heal-7f3a9c";

bool IsSpaceChar(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// What the text expects next at the innermost open container.
enum class Expect { kKey, kColon, kValue, kAfterValue };

// The scan of an unfinished container: the open containers and what each
// expects, and where an unfinished string or bare word (number, literal)
// began.
struct Scan {
  std::vector<char> open;  // '{' or '['
  Expect expect = Expect::kValue;
  bool in_string = false;
  bool string_is_key = false;
  size_t escape_start = std::string_view::npos;  // an unfinished escape
  // A \uD800-\uDBFF escape waiting for the low half of its pair.
  size_t high_surrogate_start = std::string_view::npos;
  size_t word_start = std::string_view::npos;    // an unfinished bare word
};

void EndValue(Scan& s) { s.expect = Expect::kAfterValue; }

// Advances `s` over character `c` at `i`; false when the text is not JSON.
bool Advance(Scan& s, std::string_view text, size_t i) {
  const char c = text[i];
  if (s.in_string) {
    if (s.escape_start != std::string_view::npos) {
      const bool unicode = text[s.escape_start + 1] == 'u';
      if (!unicode || i - s.escape_start == 5) {
        const bool high =
            unicode && (text[s.escape_start + 2] == 'd' ||
                        text[s.escape_start + 2] == 'D') &&
            std::string_view("89abAB").find(text[s.escape_start + 3]) !=
                std::string_view::npos;
        s.high_surrogate_start = high ? s.escape_start : std::string_view::npos;
        s.escape_start = std::string_view::npos;
      }
    } else if (c == '\\') {
      s.escape_start = i;
    } else {
      s.high_surrogate_start = std::string_view::npos;
      if (c == '"') {
        s.in_string = false;
        s.expect = s.string_is_key ? Expect::kColon : Expect::kAfterValue;
      }
    }
    return true;
  }
  if (s.word_start != std::string_view::npos) {
    if (!IsSpaceChar(c) && c != ',' && c != '}' && c != ']') return true;
    s.word_start = std::string_view::npos;
    EndValue(s);
  }
  if (IsSpaceChar(c)) return true;
  if (c == '"') {
    if (s.expect != Expect::kKey && s.expect != Expect::kValue) return false;
    s.in_string = true;
    s.string_is_key = s.expect == Expect::kKey;
  } else if (c == '{' || c == '[') {
    if (s.expect != Expect::kValue) return false;
    s.open.push_back(c);
    s.expect = c == '{' ? Expect::kKey : Expect::kValue;
  } else if (c == '}' || c == ']') {
    if (s.open.empty()) return false;
    s.open.pop_back();
    EndValue(s);
  } else if (c == ':') {
    if (s.expect != Expect::kColon) return false;
    s.expect = Expect::kValue;
  } else if (c == ',') {
    if (s.expect != Expect::kAfterValue || s.open.empty()) return false;
    s.expect = s.open.back() == '{' ? Expect::kKey : Expect::kValue;
  } else {
    if (s.expect != Expect::kValue) return false;
    s.word_start = i;
  }
  return true;
}

std::string Closers(const Scan& s) {
  std::string out;
  for (auto it = s.open.rbegin(); it != s.open.rend(); ++it) {
    out += *it == '{' ? '}' : ']';
  }
  return out;
}

}  // namespace

std::optional<HealedJson> HealJson(std::string_view partial) {
  Scan s;
  for (size_t i = 0; i < partial.size(); ++i) {
    if (!Advance(s, partial, i)) return std::nullopt;
    if (s.open.empty() && !s.in_string) return std::nullopt;  // finished
  }
  if (s.open.empty()) return std::nullopt;
  const std::string marker(kMarker);
  HealedJson h;
  if (s.in_string) {
    // Up to the last whole character: an escape, a surrogate pair or a
    // UTF-8 sequence in progress is left for the next call.
    const size_t whole = std::min(s.escape_start, s.high_surrogate_start);
    std::string_view kept = partial.substr(0, whole);
    kept = kept.substr(0, CompleteUtf8Prefix(kept));
    h.text = std::string(kept) + marker + (s.string_is_key ? "\":1" : "\"");
    h.cut = marker;
    h.text += Closers(s);
    return h;
  }
  std::string_view kept = partial.substr(0, s.word_start);
  if (s.word_start != std::string_view::npos) s.expect = Expect::kValue;
  h.text = std::string(kept);
  const bool in_object = s.open.back() == '{';
  switch (s.expect) {
    case Expect::kKey:
      h.text += "\"" + marker + "\":1";
      h.cut = "\"" + marker;
      break;
    case Expect::kColon:
      h.text += ":\"" + marker + "\"";
      h.cut = "\"" + marker;
      break;
    case Expect::kValue:
      h.text += "\"" + marker + "\"";
      h.cut = "\"" + marker;
      break;
    case Expect::kAfterValue:
      h.text += ",\"" + marker + (in_object ? "\":1" : "\"");
      h.cut = ",\"" + marker;
      break;
  }
  h.text += Closers(s);
  return h;
}

std::optional<std::string> CutAtHeal(std::string_view dumped,
                                     std::string_view cut) {
  const size_t at = dumped.find(cut);
  if (at == std::string_view::npos) return std::nullopt;
  return std::string(dumped.substr(0, at));
}

bool HoldsHealMarker(std::string_view text) {
  return text.find(kMarker) != std::string_view::npos;
}

}  // namespace kvault::chat
