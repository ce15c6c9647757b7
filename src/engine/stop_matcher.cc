#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace kvault {
namespace {

bool IsContinuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopMatcher::Output StopMatcher::Push(std::string_view text) {
  Output out;
  if (matched_) return out;
  held_.append(text);
  // The earliest occurrence wins; on a tie the longest stop string.
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stops_) {
    const size_t pos = held_.find(stop);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && stop.size() > best->size())) {
      best_pos = pos;
      best = &stop;
    }
  }
  if (best != nullptr) {
    matched_ = true;
    out.text = held_.substr(0, best_pos);
    out.match = *best;
    held_.clear();
    return out;
  }
  size_t cut = held_.size() - LongestPartialSuffix();
  // Never split a character (a stop string could start mid-character).
  while (cut > 0 && cut < held_.size() && IsContinuationByte(held_[cut])) {
    --cut;
  }
  out.text = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

std::string StopMatcher::Flush() {
  if (matched_) return {};
  return std::exchange(held_, {});
}

size_t StopMatcher::LongestPartialSuffix() const {
  size_t best = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(held_.size(), stop.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace kvault
