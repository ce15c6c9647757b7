#include "grammar/char_class.h"

#include <algorithm>

#include "grammar/utf8.h"

namespace kvault {

CharClass::CharClass(bool negated, std::vector<CodeRange> ranges)
    : negated_(negated) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  for (const CodeRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!ranges_.empty() && r.lo <= ranges_.back().hi + 1) {
      ranges_.back().hi = std::max(ranges_.back().hi, r.hi);
    } else {
      ranges_.push_back(r);
    }
  }
  // The ASCII bitmap from the ranges (a grammar makes one class per
  // literal character, so this runs hundreds of thousands of times).
  for (const CodeRange& r : ranges_) {
    for (uint32_t cp = r.lo; cp <= r.hi && cp < 128; ++cp) {
      ascii_[cp >> 6] |= uint64_t{1} << (cp & 63);
    }
  }
  if (negated_) {
    ascii_[0] = ~ascii_[0];
    ascii_[1] = ~ascii_[1];
  }
}

bool CharClass::InRanges(uint32_t cp) const {
  auto it =
      std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                       [](uint32_t v, const CodeRange& r) { return v < r.lo; });
  return it != ranges_.begin() && cp <= std::prev(it)->hi;
}

bool CharClass::MatchesSlow(uint32_t cp) const {
  if (cp > kMaxCodePoint) return false;
  return InRanges(cp) != negated_;
}

bool CharClass::IntersectsRange(uint32_t lo, uint32_t hi) const {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return false;
  if (!negated_) {
    for (const CodeRange& r : ranges_) {
      if (r.lo <= hi && lo <= r.hi) return true;
    }
    return false;
  }
  // Negated: some code point of [lo, hi] escapes every excluded range.
  uint32_t next = lo;
  for (const CodeRange& r : ranges_) {
    if (r.hi < next) continue;
    if (r.lo > next) return true;
    if (r.hi >= hi) return false;
    next = r.hi + 1;
  }
  return next <= hi;
}

bool CharClass::ContainsRange(uint32_t lo, uint32_t hi) const {
  if (lo > hi || hi > kMaxCodePoint) return false;
  if (negated_) {
    for (const CodeRange& r : ranges_) {
      if (r.lo <= hi && lo <= r.hi) return false;
    }
    return true;
  }
  // Ranges are merged, so one of them must cover [lo, hi] whole.
  for (const CodeRange& r : ranges_) {
    if (r.lo <= lo && hi <= r.hi) return true;
  }
  return false;
}

namespace {

void AppendClassChar(uint32_t cp, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' ||
      cp == '"') {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
  } else if (cp >= 0x20 && cp < 0x7F) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x100) {
    *out += "\\x";
    out->push_back(kHex[cp >> 4]);
    out->push_back(kHex[cp & 15]);
  } else if (cp < 0x10000) {
    *out += "\\u";
    for (int s = 12; s >= 0; s -= 4) out->push_back(kHex[(cp >> s) & 15]);
  } else {
    *out += "\\U";
    for (int s = 28; s >= 0; s -= 4) out->push_back(kHex[(cp >> s) & 15]);
  }
}

}  // namespace

std::string CharClass::ToString() const {
  std::string out = negated_ ? "[^" : "[";
  for (const CodeRange& r : ranges_) {
    AppendClassChar(r.lo, &out);
    if (r.hi != r.lo) {
      out.push_back('-');
      AppendClassChar(r.hi, &out);
    }
  }
  out.push_back(']');
  return out;
}

}  // namespace kvault
