#include "kv/ram_tier.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/memory_file.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

std::string Where(SeqId seq) {
  return "ram tier: seq#" + std::to_string(seq.value());
}

}  // namespace

bool RamTier::Contains(SeqId seq) const { return entries_.contains(seq); }

std::vector<SpillEntryInfo> RamTier::Entries() const {
  std::vector<SpillEntryInfo> out;
  out.reserve(entries_.size());
  for (const auto& [seq, entry] : entries_) out.push_back(entry.info);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.last_use < b.last_use;  // map order already sorts ties by seq
  });
  return out;
}

StatusOr<SpillEntryInfo> RamTier::Put(SeqId seq, uint64_t last_use,
                                      const SpillWriteFn& write) {
  auto bytes = std::make_shared<std::string>();
  StringWritableFile file(bytes.get());
  StatusOr<uint64_t> written = write(&file);
  if (!written.ok()) return written.status().WithContext(Where(seq));
  KV_RETURN_IF_ERROR(file.Close().WithContext(Where(seq)));
  if (*written != bytes->size()) {
    return InternalError(Where(seq) + ": writer reported " +
                         std::to_string(*written) + " bytes, wrote " +
                         std::to_string(bytes->size()));
  }
  auto old = entries_.find(seq);
  const uint64_t old_bytes =
      old != entries_.end() ? old->second.info.num_bytes : 0;
  const uint64_t used_after = used_bytes_ - old_bytes + bytes->size();
  if (used_after > budget_bytes_) {
    return ResourceExhaustedError(
        Where(seq) + ": state of " + std::to_string(bytes->size()) +
        " bytes does not fit: " + std::to_string(used_bytes_ - old_bytes) +
        " of " + std::to_string(budget_bytes_) + " budget bytes in use");
  }
  StatusOr<StateHeader> header = ReadStateHeader(StringRandomAccessFile(bytes));
  if (!header.ok()) {
    return header.status().WithContext(Where(seq) + ": written state invalid");
  }
  SpillEntryInfo info{seq, bytes->size(), header->num_tokens, last_use};
  used_bytes_ = used_after;
  entries_[seq] = Entry{std::move(bytes), info};
  return info;
}

StatusOr<std::unique_ptr<RandomAccessFile>> RamTier::Open(SeqId seq) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return NotFoundError(Where(seq) + ": no entry");
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<StringRandomAccessFile>(it->second.bytes));
}

Status RamTier::Remove(SeqId seq) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return Status::Ok();
  used_bytes_ -= it->second.info.num_bytes;
  entries_.erase(it);
  return Status::Ok();
}

}  // namespace kvault
