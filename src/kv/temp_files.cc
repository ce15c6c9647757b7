#include "kv/temp_files.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

namespace kvault {

std::string TempPathFor(std::string_view path) {
  static std::atomic<uint32_t> counter{0};
  // Fixed width, so the longest name a target may have is known up front.
  char unique[17];
  std::snprintf(unique, sizeof(unique), "%08x%08x",
                static_cast<unsigned>(::getpid()),
                static_cast<unsigned>(counter.fetch_add(1)));
  std::string out(path);
  out += kTempMarker;
  out += unique;
  return out;
}

bool IsTempFileName(std::string_view name) {
  const size_t marker = name.rfind(kTempMarker);
  if (marker == std::string_view::npos) return false;
  const std::string_view tail = name.substr(marker + kTempMarker.size());
  if (tail.empty()) return false;
  for (char c : tail) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

StatusOr<std::vector<std::string>> RemoveStaleTempFiles(
    Env* env, const std::string& dir) {
  KV_ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(dir));
  std::vector<std::string> removed;
  for (const std::string& name : names) {
    if (!IsTempFileName(name)) continue;
    KV_RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, name))
                           .WithContext("removing a stale temporary file"));
    removed.push_back(name);
  }
  return removed;
}

}  // namespace kvault
