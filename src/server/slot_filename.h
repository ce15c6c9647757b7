// Validation of the `filename` of POST /slots/{id}?action=save|restore, with
// llama-server's rules: the name must stay inside --slot-save-path and be a
// portable file name.
#ifndef KVAULT_SERVER_SLOT_FILENAME_H_
#define KVAULT_SERVER_SLOT_FILENAME_H_

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace kvault {

inline constexpr size_t kMaxSlotFilenameBytes = 255;

// Returns OK when `name` is a valid slot file name: not empty, at most 255
// bytes, valid UTF-8, no '/', '\\', "..", no control character (C0, DEL,
// C1), none of :*?"<>|, no look-alike separators (U+2215, U+2216, U+FF0E),
// no surrogate, U+FFFD or BOM, no leading or trailing space and no trailing
// '.'. Otherwise InvalidArgument "Invalid filename: <why>" with reason
// "invalid_filename".
Status ValidateSlotFilename(std::string_view name);

}  // namespace kvault

#endif  // KVAULT_SERVER_SLOT_FILENAME_H_
