#include "grammar/utf8.h"

namespace kvault {

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

bool DecodeUtf8(std::string_view text, uint32_t* cp, size_t* length) {
  if (text.empty()) return false;
  const uint8_t lead = static_cast<uint8_t>(text[0]);
  const int n = Utf8SequenceLength(lead);
  if (n == 0 || text.size() < static_cast<size_t>(n)) return false;
  static constexpr uint32_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t value = lead & kLeadMask[n];
  for (int i = 1; i < n; ++i) {
    const uint8_t b = static_cast<uint8_t>(text[i]);
    if ((b & 0xC0) != 0x80) return false;
    value = (value << 6) | (b & 0x3F);
  }
  if (value < kMin[n] || value > kMaxCodePoint) return false;
  if (value >= 0xD800 && value <= 0xDFFF) return false;
  *cp = value;
  *length = static_cast<size_t>(n);
  return true;
}

}  // namespace kvault
