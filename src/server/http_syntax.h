// RFC 9110/9112 grammar pieces shared by the request-head parser and the
// chunked-body decoder: tokens, field lines, list values.
#ifndef KVAULT_SERVER_HTTP_SYNTAX_H_
#define KVAULT_SERVER_HTTP_SYNTAX_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kvault {

// Returns true for RFC 9110 tchar: the characters of a token.
bool IsTchar(char c);
// Returns true when `text` is a non-empty token.
bool IsToken(std::string_view text);
// Returns `text` without leading and trailing spaces and tabs (OWS).
std::string_view TrimOws(std::string_view text);
// Returns the lower-cased, trimmed, non-empty elements of a comma list.
std::vector<std::string> SplitList(std::string_view value);

// Parses one field line "name: value" (no CR/LF in `line`): the name must be
// a token directly followed by ':' (no whitespace before the colon, no
// obs-fold), the value may hold only HTAB, SP, visible ASCII and bytes
// >= 0x80. Sets *name and *value (trimmed). `where` names the section for
// the error ("header", "trailer"); errors are InvalidArgument with reason
// "invalid_header".
Status ParseFieldLine(std::string_view line, std::string_view where,
                      std::string* name, std::string* value);

// Returns `text` quoted for an error message, cut to 60 bytes, with
// control bytes and non-ASCII shown as \xNN.
std::string Excerpt(std::string_view text);

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_SYNTAX_H_
