// Healing an unfinished JSON container so that a stream can show a tool
// call's arguments while they are generated. HealJson closes the text with
// a marker at the point where the generated text ends; a value parsed from
// the healed text and dumped compactly (DumpJson) is then cut at the
// marker, and what is left is a prefix of the dump the finished text will
// give: nothing the model may still change (a number that may grow, a
// literal, half an escape or of a UTF-8 character) comes before the cut.
#ifndef KVAULT_CHAT_JSON_HEALER_H_
#define KVAULT_CHAT_JSON_HEALER_H_

#include <optional>
#include <string>
#include <string_view>

namespace kvault::chat {

struct HealedJson {
  std::string text;  // the partial text, closed
  std::string cut;   // where to cut a dump of a value built from `text`
};

// Returns `partial` (the start of a JSON object or array, unfinished:
// ScanContainer says kNeedMore) closed with the marker in place, or nullopt
// when it is not the start of JSON.
std::optional<HealedJson> HealJson(std::string_view partial);

// Returns the part of `dumped` before `cut`, or nullopt when `cut` does not
// occur (the value was complete before the healed point).
std::optional<std::string> CutAtHeal(std::string_view dumped,
                                     std::string_view cut);

// Returns true when `text` holds the healing marker.
bool HoldsHealMarker(std::string_view text);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_JSON_HEALER_H_
