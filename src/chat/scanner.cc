#include "chat/scanner.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "chat/json_healer.h"

namespace kvault::chat {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Characters that may appear outside strings in a JSON container: anything
// else proves the text is not JSON, so the scan can fail early (and a
// streaming parser can release the text as content sooner).
bool IsJsonStructural(char c) {
  if (IsSpace(c) || (c >= '0' && c <= '9')) return true;
  static constexpr std::string_view kOthers = "{}[],:-+.eEtrufalsn";
  return kOthers.find(c) != std::string_view::npos;
}

// Finds the end of the JSON object or array that `s` starts with: kOk with
// its length, kNeedMore when `s` ends inside it, kFail when it is not JSON.
Step ScanContainer(std::string_view s, size_t* len) {
  std::vector<char> closers;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return Step::kFail;  // JSON strings hold no raw control characters
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      closers.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (closers.empty() || closers.back() != c) return Step::kFail;
      closers.pop_back();
      if (closers.empty()) {
        *len = i + 1;
        return nlohmann::ordered_json::accept(s.substr(0, i + 1)) ? Step::kOk
                                                                  : Step::kFail;
      }
    } else if (!IsJsonStructural(c)) {
      return Step::kFail;
    }
  }
  return Step::kNeedMore;
}

}  // namespace

void Cursor::SkipSpace() {
  while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
}

Step Cursor::Literal(std::string_view lit) {
  std::string_view r = rest();
  // Healing, after a JSON container: the end of the text (also inside
  // `lit`) stands for what closes the call.
  if (healing_ && json_seen_ && (r.empty() || IsProperPrefix(r, lit))) {
    pos_ = text_.size();
    return Step::kOk;
  }
  if (r.substr(0, lit.size()) == lit) {
    pos_ += lit.size();
    return Step::kOk;
  }
  return r.empty() || IsProperPrefix(r, lit) ? Step::kNeedMore : Step::kFail;
}

Step Cursor::SpaceThenLiteral(std::string_view lit) {
  size_t saved = pos_;
  SkipSpace();
  Step s = Literal(lit);
  if (s != Step::kOk) pos_ = saved;
  return s;
}

Step Cursor::Until(std::string_view lit, std::string_view* skipped) {
  size_t at = text_.find(lit, pos_);
  if (at == std::string_view::npos) return Step::kNeedMore;
  *skipped = text_.substr(pos_, at - pos_);
  pos_ = at;
  return Step::kOk;
}

Step Cursor::JsonContainer(std::string_view* json) {
  size_t start = pos_;
  while (start < text_.size() && IsSpace(text_[start])) ++start;
  if (start >= text_.size()) return Step::kNeedMore;
  if (text_[start] != '{' && text_[start] != '[') return Step::kFail;
  size_t len = 0;
  Step s = ScanContainer(text_.substr(start), &len);
  if (s == Step::kOk) {
    *json = text_.substr(start, len);
    pos_ = start + len;
    json_seen_ = true;
  }
  if (s == Step::kNeedMore && healing_ && !healed()) {
    std::optional<HealedJson> h = HealJson(text_.substr(start));
    if (!h.has_value()) return Step::kFail;
    healed_ = std::make_shared<const std::string>(std::move(h->text));
    heal_cut_ = std::move(h->cut);
    *json = *healed_;
    pos_ = text_.size();
    json_seen_ = true;
    return Step::kOk;
  }
  return s;
}

Step Cursor::JsonString(std::string* value) {
  size_t start = pos_;
  while (start < text_.size() && IsSpace(text_[start])) ++start;
  if (start >= text_.size()) return Step::kNeedMore;
  if (text_[start] != '"') return Step::kFail;
  bool escaped = false;
  for (size_t i = start + 1; i < text_.size(); ++i) {
    if (escaped) {
      escaped = false;
    } else if (text_[i] == '\\') {
      escaped = true;
    } else if (text_[i] == '"') {
      auto j = ParseJsonOrDiscard(text_.substr(start, i + 1 - start));
      if (!j.is_string()) return Step::kFail;
      *value = j.get<std::string>();
      pos_ = i + 1;
      return Step::kOk;
    }
  }
  return Step::kNeedMore;
}

bool IsProperPrefix(std::string_view text, std::string_view marker) {
  return !text.empty() && text.size() < marker.size() &&
         marker.substr(0, text.size()) == text;
}

size_t PartialMarkerSuffix(std::string_view text,
                           const std::vector<std::string_view>& markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    size_t max = std::min(text.size(), m.size() - 1);
    for (size_t n = max; n > best; --n) {
      if (text.substr(text.size() - n) == m.substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

std::string_view TrimLeadingSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return s.substr(i);
}

std::string_view TrimTrailingSpace(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && IsSpace(s[n - 1])) --n;
  return s.substr(0, n);
}

std::string_view TrimSpace(std::string_view s) {
  return TrimTrailingSpace(TrimLeadingSpace(s));
}

size_t CompleteUtf8Prefix(std::string_view s) {
  // Walk back over at most three continuation bytes to the lead byte and
  // drop the sequence when it is shorter than the lead byte announces.
  size_t n = s.size();
  size_t back = 0;
  while (back < 3 && back < n &&
         (static_cast<unsigned char>(s[n - 1 - back]) & 0xC0) == 0x80) {
    ++back;
  }
  if (back == n) return n;
  unsigned char lead = static_cast<unsigned char>(s[n - 1 - back]);
  size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return back + 1 < want ? n - 1 - back : n;
}

nlohmann::ordered_json ParseJsonOrDiscard(std::string_view text) {
  return nlohmann::ordered_json::parse(text, nullptr,
                                       /*allow_exceptions=*/false);
}

std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kvault::chat
