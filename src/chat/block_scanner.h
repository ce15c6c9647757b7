// The shared shape of marker-delimited tool-call syntaxes: content, then a
// start marker opening a block of one or more calls, then more content. A
// block that does not parse leaves its marker in content; while streaming,
// an unfinished block (or a marker that may be starting) is held back.
#ifndef KVAULT_CHAT_BLOCK_SCANNER_H_
#define KVAULT_CHAT_BLOCK_SCANNER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_syntax.h"
#include "chat/scanner.h"

namespace kvault::chat {

// Parses one block whose start marker is at the cursor, appending its calls
// and leaving the cursor after it when kOk. `partial`: more text may follow
// the cursor's text (only blocks that run to the end of the text need it).
using BlockParser = Step (*)(Cursor* cur, bool partial,
                             std::vector<ToolCall>* calls);

struct BlockKind {
  std::string_view marker;
  BlockParser parse;
  // While streaming, an unfinished block shows its calls as far as they
  // are certain (see AppendHealedCalls); false for syntaxes whose call id
  // comes after the arguments (a call must not show before its id).
  bool shows_unfinished = true;
};

// Splits `body` into content and blocks of `kinds`, appending both to *msg.
// Whitespace next to a block is dropped from content.
void ScanBlocks(std::string_view body, const std::vector<BlockKind>& kinds,
                bool partial, ChatMessage* msg);

// Appends to *shown the calls parsed from a healing cursor (see
// Cursor::EnableHealing) as a stream may show them: those before the healed
// point whole, the one it falls in with its arguments cut there -- once its
// name (and id, if any) is whole. Returns how many it appended.
size_t AppendHealedCalls(const Cursor& healed, std::vector<ToolCall> calls,
                         std::vector<ToolCall>* shown);

// Builds a call from a JSON object holding the name under `name_key` and the
// arguments (an object, or a string holding one) under one of `args_keys`;
// an "id" string becomes the id. False when the object has another shape.
bool CallFromJson(const nlohmann::ordered_json& obj, std::string_view name_key,
                  const std::vector<std::string_view>& args_keys,
                  ToolCall* call);
// As CallFromJson for each element of an array (or a lone object) of calls;
// false when any element fails.
bool CallsFromJson(std::string_view json, std::string_view name_key,
                   const std::vector<std::string_view>& args_keys,
                   std::vector<ToolCall>* calls);

// Returns an XML-style argument value as JSON: text that parses as a JSON
// number, boolean, null, object or array is that value; anything else
// (including quoted text) is a string, since templates write strings raw.
nlohmann::ordered_json XmlArgValue(std::string_view raw);

// Finds where an XML-style value ends: the first `close` that is followed
// (after whitespace) by one of `next`, so that values may contain `close`
// themselves. kNeedMore when that is not yet decidable.
Step FindValueEnd(const Cursor& cur, std::string_view close,
                  const std::vector<std::string_view>& next, size_t* end);

// Reads a function name up to (not including) `stop`: ASCII letters,
// digits, '_', '-', '.', ':' only; kFail on anything else.
Step ReadName(Cursor* cur, std::string_view stop, std::string* name);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_BLOCK_SCANNER_H_
