// StopMatcher: finds llama-server style stop strings in streamed text.
// Text that might still turn into a stop string is held back, so a client
// never sees the beginning of a stop word; only whole UTF-8 characters are
// released (the input is valid UTF-8 from StreamingDetokenizer).
#ifndef KVAULT_ENGINE_STOP_MATCHER_H_
#define KVAULT_ENGINE_STOP_MATCHER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvault {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;                  // released now
    std::optional<std::string> match;  // the stop string that matched
  };

  // Adds `text`; returns what may be released. After a match the text
  // before the stop string is released and everything else is dropped;
  // further pushes return nothing.
  Output Push(std::string_view text);
  // Returns the held-back text (generation ended without a match).
  std::string Flush();
  // Returns true once a stop string matched.
  bool matched() const { return matched_; }

 private:
  // Returns the length of the longest suffix of held_ that is a proper
  // prefix of some stop string.
  size_t LongestPartialSuffix() const;

  std::vector<std::string> stops_;
  std::string held_;  // unreleased text
  bool matched_ = false;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_STOP_MATCHER_H_
