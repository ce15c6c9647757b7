// Validation of the `filename` of POST /slots/{id}?action=save|restore, with
// llama-server's rules: the name must stay inside --slot-save-path and be a
// portable file name.
#ifndef KVAULT_SERVER_SLOT_FILENAME_H_
#define KVAULT_SERVER_SLOT_FILENAME_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/status.h"
#include "kv/temp_files.h"

namespace kvault {

// The longest name a save can write: the temporary file it writes first
// ("<name>.tmp-<16 hex>") must still fit the filesystem's NAME_MAX (255).
inline constexpr size_t kMaxSlotFilenameBytes = 255 - kTempSuffixBytes;

// Returns OK when `name` is a valid slot file name: not empty, at most
// kMaxSlotFilenameBytes (234) bytes, not a temporary file name
// (IsTempFileName: "*.tmp-<hex>", what an interrupted save leaves), valid
// UTF-8, no '/', '\\', "..", no control character (C0, DEL,
// C1), none of :*?"<>|, no look-alike separators (U+2215, U+2216, U+FF0E),
// no surrogate, U+FFFD or BOM, no leading or trailing space and no trailing
// '.'. Otherwise InvalidArgument "Invalid filename: <why>" with reason
// "invalid_filename".
Status ValidateSlotFilename(std::string_view name);

// Start-up of --slot-save-path `dir`: creates it when missing (its parent
// must exist) and removes the temporary files interrupted saves left in it
// (logged). InvalidArgument naming the directory when it cannot be
// created or is not a directory, so the server refuses to start instead of
// failing every save later.
Status PrepareSlotSaveDir(Env* env, const std::string& dir);

}  // namespace kvault

#endif  // KVAULT_SERVER_SLOT_FILENAME_H_
