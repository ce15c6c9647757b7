// Names of the temporary files atomic writes use ("<target>.tmp-<unique>"),
// and their clean-up: a write killed before its rename (kill -9, power
// loss) leaves one behind, which must neither pile up nor be mistaken for
// a state file a client may restore by name.
#ifndef KVAULT_KV_TEMP_FILES_H_
#define KVAULT_KV_TEMP_FILES_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"

namespace kvault {

// What marks a temporary file name; the unique part follows it.
inline constexpr std::string_view kTempMarker = ".tmp-";
// Bytes TempPathFor adds to a name: the marker and 16 hex digits. A target
// name may be at most NAME_MAX (255) minus this long.
inline constexpr size_t kTempSuffixBytes = kTempMarker.size() + 16;

// Returns `path` + ".tmp-" + 16 lowercase hex digits unique among the
// temporary files of every process (process id and a per-process counter).
std::string TempPathFor(std::string_view path);
// Returns true when the file name `name` (no directory) is a temporary
// file name: it ends in ".tmp-" followed by one or more of [0-9a-f-] (this
// build's names and the "<pid>-<n>" / "<micros>-<n>" forms of older ones).
bool IsTempFileName(std::string_view name);
// Removes every temporary file (IsTempFileName) in directory `dir`; returns
// the names removed. Only safe while no writer uses `dir` (start-up).
StatusOr<std::vector<std::string>> RemoveStaleTempFiles(Env* env,
                                                        const std::string& dir);

}  // namespace kvault

#endif  // KVAULT_KV_TEMP_FILES_H_
