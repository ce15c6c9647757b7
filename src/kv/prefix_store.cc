#include "kv/prefix_store.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/memory_file.h"
#include "kv/page_record.h"
#include "kv/restore_job.h"

namespace kvault {

PrefixStore::PrefixStore(std::unique_ptr<PageStore> store,
                         const ModelFingerprint& model, const PageKey& root,
                         SaveOptions save)
    : store_(std::move(store)), model_(model), root_(root),
      save_(std::move(save)) {}

Status PrefixStore::Publish(const KvCache& cache, SeqId seq) {
  if (!cache.table().Contains(seq)) return Status::Ok();
  KV_ASSIGN_OR_RETURN(const SaveSnapshot snap,
                      TakeSaveSnapshot(cache, seq, model_));
  const std::vector<PageKey> keys =
      PageKeyChain(root_, snap.tokens, snap.page_size);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (store_->Contains(keys[i])) continue;
    std::string record;
    StringWritableFile out(&record);
    const PageKey& parent = i == 0 ? root_ : keys[i - 1];
    Status written = WritePageRecord(*cache.storage(), PageSnapshot(snap, i),
                                     keys[i], parent, save_, &out)
                         .status();
    if (written.ok()) written = store_->Put(keys[i], record);
    if (!written.ok()) {
      ++stats_.publish_failures;
      return written.WithContext("prefix store " + std::string(store_->name()) +
                                 ": page " + keys[i].ToHex());
    }
    ++stats_.pages_published;
  }
  return Status::Ok();
}

bool PrefixStore::HasPageAt(std::span<const TokenPos> wanted, uint64_t begin,
                            uint32_t page_size) const {
  if (page_size == 0 || begin % page_size != 0 ||
      begin + page_size > wanted.size()) {
    return false;
  }
  const std::vector<PageKey> keys =
      PageKeyChain(root_, wanted.first(begin + page_size), page_size);
  return store_->Contains(keys.back());
}

uint64_t PrefixStore::Extend(KvCache* cache, SeqId seq,
                             std::span<const TokenPos> wanted, uint64_t have,
                             uint64_t limit) {
  const uint32_t page_size = cache->pool().page_size();
  if (cache->MayMoveCellsOnAppend() || have % page_size != 0 ||
      cache->table().Length(seq) != have) {
    return have;
  }
  limit = std::min<uint64_t>(limit, wanted.size());
  const std::vector<PageKey> keys =
      PageKeyChain(root_, wanted.first(limit), page_size);
  uint64_t i = have / page_size;
  for (; i < keys.size() && store_->Contains(keys[i]); ++i) {
    const PageKey& parent = i == 0 ? root_ : keys[i - 1];
    if (!LoadPage(cache, seq, keys[i], parent,
                  wanted.subspan(i * page_size, page_size))) {
      break;
    }
    ++stats_.pages_loaded;
  }
  return std::max<uint64_t>(have, i * page_size);
}

bool PrefixStore::LoadPage(KvCache* cache, SeqId seq, const PageKey& key,
                           const PageKey& parent,
                           std::span<const TokenPos> cells) {
  StatusOr<std::unique_ptr<RandomAccessFile>> file = store_->Get(key);
  if (!file.ok()) return false;  // gone meanwhile: a miss
  Status bad;
  StatusOr<std::unique_ptr<RandomAccessFile>> state =
      OpenPageRecord(**file, key, parent);
  if (!state.ok()) {
    bad = state.status();
  } else {
    StatusOr<RestoreResult> r =
        RestoreSequence(**state, model_, kPrefixLoadSeq, cache);
    if (r.status().code() == StatusCode::kResourceExhausted) return false;
    bad = r.status();
  }
  if (bad.ok()) {
    const std::span<const TokenPos> got = cache->table().Cells(kPrefixLoadSeq);
    if (std::equal(got.begin(), got.end(), cells.begin(), cells.end())) {
      if (cache->AppendSequence(seq, kPrefixLoadSeq).ok()) return true;
      cache->RemoveSequence(kPrefixLoadSeq);
      return false;
    }
    cache->RemoveSequence(kPrefixLoadSeq);
    bad = CorruptionError("its cells are not the page's tokens");
  }
  ++stats_.bad_records;
  KV_LOG(WARNING) << "prefix store " << store_->name() << ": record "
                  << key.ToHex() << " refused and removed: " << bad;
  Status removed = store_->Remove(key);
  if (!removed.ok()) KV_LOG(WARNING) << removed;
  return false;
}

PrefixStoreStats PrefixStore::Stats() const {
  PrefixStoreStats s = stats_;
  s.store = store_->Stats();
  return s;
}

}  // namespace kvault
