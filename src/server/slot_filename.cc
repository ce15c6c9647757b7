#include "server/slot_filename.h"

#include <cstdio>
#include <string>
#include <vector>

#include "core/log.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

Status Invalid(const std::string& why) {
  return InvalidArgumentError("Invalid filename: " + why)
      .WithReason(kReasonInvalidFilename);
}

std::string CodePointName(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

// Returns why `cp` may not appear in a file name, or "" when it may.
std::string ForbiddenCodePoint(char32_t cp) {
  if (cp <= 0x1F || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) {
    return "control character " + CodePointName(cp);
  }
  switch (cp) {
    case '/':
    case '\\':
      return std::string("path separator '") + static_cast<char>(cp) + "'";
    case ':':
    case '*':
    case '?':
    case '"':
    case '<':
    case '>':
    case '|':
      return std::string("reserved character '") + static_cast<char>(cp) + "'";
    case 0x2215:
    case 0x2216:
    case 0xFF0E:
      return "look-alike separator " + CodePointName(cp);
    case 0xFFFD:
    case 0xFEFF:
      return "character " + CodePointName(cp);
    default:
      break;
  }
  if (cp >= 0xD800 && cp <= 0xDFFF) return "surrogate " + CodePointName(cp);
  return "";
}

}  // namespace

Status ValidateSlotFilename(std::string_view name) {
  if (name.empty()) return Invalid("empty");
  if (name.size() > kMaxSlotFilenameBytes) {
    return Invalid(std::to_string(name.size()) + " bytes, at most " +
                   std::to_string(kMaxSlotFilenameBytes) +
                   " allowed (255 minus the " +
                   std::to_string(kTempSuffixBytes) +
                   " bytes of the temporary name a save writes first)");
  }
  if (IsTempFileName(name)) {
    return Invalid("'" + std::string(name) +
                   "' is a temporary file name (\"*.tmp-<hex>\"), reserved "
                   "for the files a save writes before it renames them");
  }
  for (size_t pos = 0; pos < name.size();) {
    Utf8Decoded d = DecodeUtf8At(name, pos);
    if (d.step != Utf8Step::kValid) {
      return Invalid("invalid UTF-8 at byte " + std::to_string(pos));
    }
    std::string why = ForbiddenCodePoint(d.code_point);
    if (!why.empty()) return Invalid(why + " at byte " + std::to_string(pos));
    pos += d.num_bytes;
  }
  if (name.find("..") != std::string_view::npos)
    return Invalid("contains \"..\"");
  if (name.front() == ' ' || name.back() == ' ') {
    return Invalid("leading or trailing space");
  }
  if (name.back() == '.') return Invalid("trailing '.'");
  return Status::Ok();
}

Status PrepareSlotSaveDir(Env* env, const std::string& dir) {
  const std::string where = "--slot-save-path " + dir;
  if (Status made = env->CreateDir(dir); !made.ok()) {
    return InvalidArgumentError(where + ": cannot create the directory (" +
                                std::string(made.message()) + ")");
  }
  StatusOr<std::vector<std::string>> removed = RemoveStaleTempFiles(env, dir);
  if (!removed.ok()) {
    return InvalidArgumentError(where + ": " +
                                std::string(removed.status().message()));
  }
  for (const std::string& name : *removed) {
    KV_LOG(INFO) << where << ": removed " << name
                 << ", left by an interrupted save";
  }
  return Status::Ok();
}

}  // namespace kvault
