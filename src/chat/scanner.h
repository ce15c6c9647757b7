// Small scanning helpers shared by the format parsers. Every helper answers
// one of three ways so that streaming stays consistent: the text matches,
// the text cannot match whatever follows (kFail), or the text ended before
// the answer was known (kNeedMore). A kFail is never revised by more input.
#ifndef KVAULT_CHAT_SCANNER_H_
#define KVAULT_CHAT_SCANNER_H_

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kvault::chat {

enum class Step { kOk, kNeedMore, kFail };

// A position in a text being parsed.
class Cursor {
 public:
  explicit Cursor(std::string_view text, size_t pos = 0)
      : text_(text), pos_(pos) {}

  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  std::string_view text() const { return text_; }
  // Returns the text from the cursor on.
  std::string_view rest() const { return text_.substr(pos_); }
  bool AtEnd() const { return pos_ >= text_.size(); }

  // Skips ASCII whitespace.
  void SkipSpace();
  // Consumes `lit` when the text continues with it; kNeedMore when the rest
  // is a proper prefix of it.
  Step Literal(std::string_view lit);
  // As Literal after skipping whitespace.
  Step SpaceThenLiteral(std::string_view lit);
  // Consumes up to the first `lit` (excluded) and stores the skipped text;
  // kNeedMore when `lit` does not occur yet.
  Step Until(std::string_view lit, std::string_view* skipped);
  // Consumes one complete JSON object or array (after whitespace) and stores
  // its text; kFail as soon as the text cannot be one.
  Step JsonContainer(std::string_view* json);
  // Consumes a JSON string literal (after whitespace) and stores its
  // decoded value.
  Step JsonString(std::string* value);

  // Healing (see json_healer.h), for showing an unfinished tool call while
  // it streams: a JSON container the text ends inside is completed with
  // the healing marker and counts as whole; once a JSON container was read
  // (healed or whole), the end of the text satisfies any Literal.
  void EnableHealing() { healing_ = true; }
  // Returns true once a container was healed.
  bool healed() const { return healed_ != nullptr; }
  // Returns true once a JSON container was read (healed or whole).
  bool read_json() const { return json_seen_; }
  // Returns where to cut a dump of a value built from the healed text.
  const std::string& heal_cut() const { return heal_cut_; }

 private:
  std::string_view text_;
  size_t pos_;
  bool healing_ = false;
  bool json_seen_ = false;  // a JSON container was read
  // The healed container's text (shared: views of it outlive copies).
  std::shared_ptr<const std::string> healed_;
  std::string heal_cut_;
};

// Returns the length of the longest suffix of `text` that is a proper,
// non-empty prefix of one of `markers` (0 when none): text to hold back
// while streaming because a marker may be starting.
size_t PartialMarkerSuffix(std::string_view text,
                           const std::vector<std::string_view>& markers);
// Returns true when `text` is a non-empty proper prefix of `marker`.
bool IsProperPrefix(std::string_view text, std::string_view marker);

// Returns `s` without leading / trailing ASCII whitespace.
std::string_view TrimSpace(std::string_view s);
std::string_view TrimLeadingSpace(std::string_view s);
std::string_view TrimTrailingSpace(std::string_view s);

// Returns the length of `s` without a trailing incomplete UTF-8 sequence.
size_t CompleteUtf8Prefix(std::string_view s);

// Parses `text` as JSON without throwing; a discarded value on error.
nlohmann::ordered_json ParseJsonOrDiscard(std::string_view text);
// Returns compact JSON text (invalid UTF-8 replaced, never throws).
std::string DumpJson(const nlohmann::ordered_json& value);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_SCANNER_H_
