#include "kv/prefix_store.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "core/memory_file.h"
#include "kv/page_record.h"
#include "kv/restore_job.h"

namespace kvault {

namespace {

// Weight of the newest prefill in the rate's moving average.
constexpr double kPrefillWeight = 0.2;

// Reads all of `file`.
StatusOr<std::string> ReadAll(const RandomAccessFile& file) {
  std::string bytes(file.size(), '\0');
  KV_ASSIGN_OR_RETURN(size_t n,
                      file.ReadAt(0, std::as_writable_bytes(std::span(bytes))));
  if (n != bytes.size()) return IOError("short read of a page record");
  return bytes;
}

// Returns the record inside sealed `file` when its tag is right.
StatusOr<std::unique_ptr<RandomAccessFile>> OpenSealed(
    const RecordMac& mac, const RandomAccessFile& file) {
  KV_ASSIGN_OR_RETURN(std::string sealed, ReadAll(file));
  KV_ASSIGN_OR_RETURN(
      std::span<const std::byte> inside,
      mac.Open(kPageRecordMacLabel, std::as_bytes(std::span(sealed))));
  sealed.resize(inside.size());
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<StringRandomAccessFile>(
          std::make_shared<const std::string>(std::move(sealed))));
}

}  // namespace

std::vector<std::unique_ptr<PageStore>> SingleTier(
    std::unique_ptr<PageStore> store) {
  std::vector<std::unique_ptr<PageStore>> tiers;
  tiers.push_back(std::move(store));
  return tiers;
}

PrefixStore::PrefixStore(std::vector<std::unique_ptr<PageStore>> tiers,
                         const ModelFingerprint& model, const PageKey& root,
                         SaveOptions save,
                         std::shared_ptr<const RecordMac> mac)
    : model_(model), root_(root), save_(std::move(save)), mac_(std::move(mac)) {
  KV_CHECK(!tiers.empty());
  for (std::unique_ptr<PageStore>& store : tiers) {
    KV_CHECK(store != nullptr);
    Tier tier;
    tier.stats.name = std::string(store->name());
    tier.store = std::move(store);
    tiers_.push_back(std::move(tier));
  }
}

Status PrefixStore::Publish(const KvCache& cache, SeqId seq) {
  if (!cache.table().Contains(seq)) return Status::Ok();
  KV_ASSIGN_OR_RETURN(const SaveSnapshot snap,
                      TakeSaveSnapshot(cache, seq, model_));
  std::vector<PageKey> keys = PageKeyChain(root_, snap.tokens, snap.page_size);
  if (snap.tokens.size() % snap.page_size != 0) {  // the partial last page
    keys.push_back(TailKey(keys.empty() ? root_ : keys.back()));
  }
  Status first_error;
  for (size_t i = 0; i < keys.size(); ++i) {
    const PageKey& parent = i == 0 ? root_ : keys[i - 1];
    std::string record;  // written once, for the first tier lacking it
    for (Tier& tier : tiers_) {
      if (tier.store->Contains(keys[i])) continue;
      Status written;
      if (record.empty()) {
        StringWritableFile out(&record);
        written = WritePageRecord(*cache.storage(), PageSnapshot(snap, i),
                                  keys[i], parent, save_, &out)
                      .status();
        if (written.ok() && mac_ != nullptr) {
          mac_->Seal(kPageRecordMacLabel, &record);
        }
      }
      if (written.ok()) {
        // The last tier may take the record itself; the others a copy.
        written = tier.store->Put(
            keys[i], &tier == &tiers_.back() ? std::move(record) : record);
      }
      if (written.ok()) {
        ++tier.stats.pages_published;
        continue;
      }
      ++tier.stats.publish_failures;
      if (first_error.ok()) {
        first_error = written.WithContext("prefix store " + tier.stats.name +
                                          ": page " + keys[i].ToHex());
      }
    }
  }
  return first_error;
}

void PrefixStore::NotePrefill(uint64_t num_tokens, double seconds) {
  if (num_tokens == 0 || seconds <= 0) return;
  const double per_token = seconds / static_cast<double>(num_tokens);
  const double w = prefill_seconds_per_token_ == 0 ? 1.0 : kPrefillWeight;
  prefill_seconds_per_token_ += w * (per_token - prefill_seconds_per_token_);
}

double PrefixStore::RecomputeSeconds(uint64_t num_tokens) const {
  if (prefill_seconds_per_token_ == 0) {
    return std::numeric_limits<double>::infinity();  // not measured yet
  }
  return prefill_seconds_per_token_ * static_cast<double>(num_tokens);
}

bool PrefixStore::HasPageAt(std::span<const TokenPos> wanted, uint64_t begin,
                            uint32_t page_size) const {
  if (page_size == 0 || begin % page_size != 0 ||
      begin + page_size > wanted.size()) {
    return false;
  }
  const std::vector<PageKey> keys =
      PageKeyChain(root_, wanted.first(begin + page_size), page_size);
  for (const Tier& tier : tiers_) {
    if (tier.store->Contains(keys.back())) return true;
  }
  return false;
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
  ReadAhead ahead;
  uint64_t i = have / page_size;
  for (; i < keys.size(); ++i) {
    if (!FetchPage(cache, seq, keys, i,
                   wanted.subspan(i * page_size, page_size), &ahead)) {
      break;
    }
  }
  // Where the whole pages end, the filled part of a last page may follow.
  const uint64_t whole = i * page_size;
  const PageKey& parent = i == 0 ? root_ : keys[i - 1];
  const uint64_t tail = FetchTail(
      cache, seq, parent,
      wanted.subspan(whole, std::min<uint64_t>(page_size - 1, limit - whole)));
  return std::max<uint64_t>(have, whole + tail);
}

uint64_t PrefixStore::FetchTail(KvCache* cache, SeqId seq,
                                const PageKey& parent,
                                std::span<const TokenPos> cells) {
  if (cells.empty()) return 0;
  const PageKey key = TailKey(parent);
  const uint64_t bytes = cells.size() * cache->storage()->layout().cell_bytes();
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Tier& tier = tiers_[t];
    if (!WorthFetching(tier, key, bytes, cells.size())) continue;
    StatusOr<std::unique_ptr<RandomAccessFile>> file = tier.store->Get(key);
    if (!file.ok()) continue;
    const uint64_t got = LoadTail(cache, seq, tier, **file, key, parent, cells);
    if (got == 0) continue;  // another conversation's tail under this parent
    ++tier.stats.pages_loaded;
    if (t > 0) CopyNearer(t, key, **file);
    return got;
  }
  return 0;
}

bool PrefixStore::FetchPage(KvCache* cache, SeqId seq,
                            std::span<const PageKey> keys, size_t i,
                            std::span<const TokenPos> cells, ReadAhead* ahead) {
  const uint32_t page_size = cache->pool().page_size();
  const uint64_t page_bytes =
      uint64_t{page_size} * cache->storage()->layout().cell_bytes();
  const PageKey& key = keys[i];
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Tier& tier = tiers_[t];
    if (ahead->tier != t || i < ahead->first ||
        i >= ahead->first + ahead->files.size()) {
      if (!WorthFetching(tier, key, page_bytes, page_size)) continue;
      // This page and the next few of the chain, in one round trip.
      const size_t n = std::min(kReadAheadPages, keys.size() - i);
      *ahead = ReadAhead{t, i, tier.store->GetMany(keys.subspan(i, n))};
    }
    StatusOr<std::unique_ptr<RandomAccessFile>>& file =
        ahead->files[i - ahead->first];
    if (!file.ok()) continue;  // absent, gone meanwhile, or the store is down
    const PageKey& parent = i == 0 ? root_ : keys[i - 1];
    if (!LoadPage(cache, seq, tier, **file, key, parent, cells)) continue;
    ++tier.stats.pages_loaded;
    if (t > 0) CopyNearer(t, key, **file);
    return true;
  }
  return false;
}

bool PrefixStore::WorthFetching(Tier& tier, const PageKey& key,
                                uint64_t num_bytes, uint64_t num_tokens) {
  if (!tier.store->Contains(key)) return false;
  if (tier.store->ExpectedFetchSeconds(num_bytes) <=
      RecomputeSeconds(num_tokens)) {
    return true;
  }
  ++tier.stats.fetches_skipped;
  return false;
}

void PrefixStore::CopyNearer(size_t t, const PageKey& key,
                             const RandomAccessFile& record) {
  StatusOr<std::string> bytes = ReadAll(record);
  for (size_t near = 0; bytes.ok() && near < t; ++near) {
    if (tiers_[near].store->Put(key, *bytes).ok()) {
      ++tiers_[near].stats.pages_published;
    } else {
      ++tiers_[near].stats.publish_failures;
    }
  }
}

Status PrefixStore::LoadRecord(KvCache* cache, const RandomAccessFile& record,
                               const PageKey& key, const PageKey& parent) {
  const RandomAccessFile* body = &record;
  std::unique_ptr<RandomAccessFile> opened;
  if (mac_ != nullptr) {
    KV_ASSIGN_OR_RETURN(opened, OpenSealed(*mac_, record));
    body = opened.get();
  }
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> state,
                      OpenPageRecord(*body, key, parent));
  return RestoreSequence(*state, model_, kPrefixLoadSeq, cache).status();
}

void PrefixStore::Refuse(Tier& tier, const PageKey& key, const Status& why) {
  ++tier.stats.bad_records;
  KV_LOG(WARNING) << "prefix store " << tier.stats.name << ": record "
                  << key.ToHex() << " refused and removed: " << why;
  Status removed = tier.store->Remove(key);
  if (!removed.ok()) KV_LOG(WARNING) << removed;
}

bool PrefixStore::LoadPage(KvCache* cache, SeqId seq, Tier& tier,
                           const RandomAccessFile& record, const PageKey& key,
                           const PageKey& parent,
                           std::span<const TokenPos> cells) {
  Status loaded = LoadRecord(cache, record, key, parent);
  if (loaded.code() == StatusCode::kResourceExhausted) return false;
  if (loaded.ok()) {
    const std::span<const TokenPos> got = cache->table().Cells(kPrefixLoadSeq);
    const bool same = std::ranges::equal(got, cells);
    if (same && cache->AppendSequence(seq, kPrefixLoadSeq).ok()) return true;
    cache->RemoveSequence(kPrefixLoadSeq);
    if (same) return false;
    loaded = CorruptionError("its cells are not the page's tokens");
  }
  Refuse(tier, key, loaded);
  return false;
}

uint64_t PrefixStore::LoadTail(KvCache* cache, SeqId seq, Tier& tier,
                               const RandomAccessFile& record,
                               const PageKey& key, const PageKey& parent,
                               std::span<const TokenPos> cells) {
  const Status loaded = LoadRecord(cache, record, key, parent);
  if (loaded.code() == StatusCode::kResourceExhausted) return 0;
  if (!loaded.ok()) {
    Refuse(tier, key, loaded);
    return 0;
  }
  // Keep the cells that continue the prompt; the rest are dropped by
  // position, which needs the record's positions to rise.
  const std::span<const TokenPos> got = cache->table().Cells(kPrefixLoadSeq);
  size_t n = 0;
  while (n < got.size() && n < cells.size() && got[n] == cells[n]) ++n;
  bool rising = true;
  for (size_t c = 1; c < got.size(); ++c) rising &= got[c - 1].pos < got[c].pos;
  const std::optional<Pos> cut =
      n < got.size() ? std::optional<Pos>(got[n].pos) : std::nullopt;
  if (n > 0 && cut.has_value() &&
      (!rising ||
       !cache
            ->RemoveRange(kPrefixLoadSeq, *cut, std::numeric_limits<Pos>::max())
            .ok())) {
    n = 0;
  }
  if (n > 0 && cache->AppendSequence(seq, kPrefixLoadSeq).ok()) return n;
  cache->RemoveSequence(kPrefixLoadSeq);
  return 0;
}

bool PrefixStore::HasTailAt(std::span<const TokenPos> wanted, uint64_t begin,
                            uint32_t page_size) const {
  if (page_size == 0 || begin % page_size != 0 || begin >= wanted.size()) {
    return false;
  }
  const std::vector<PageKey> keys =
      PageKeyChain(root_, wanted.first(begin), page_size);
  const PageKey key = TailKey(keys.empty() ? root_ : keys.back());
  for (const Tier& tier : tiers_) {
    if (tier.store->Contains(key)) return true;
  }
  return false;
}

std::vector<uint64_t> PrefixStore::HeldCells(std::span<const TokenPos> wanted,
                                             uint32_t page_size) const {
  const std::vector<PageKey> keys = PageKeyChain(root_, wanted, page_size);
  std::vector<uint64_t> held;
  for (const Tier& tier : tiers_) {
    size_t i = 0;
    while (i < keys.size() && tier.store->Contains(keys[i])) ++i;
    held.push_back(uint64_t{i} * page_size);
  }
  return held;
}

PrefixStoreStats PrefixStore::Stats() const {
  PrefixStoreStats s;
  for (const Tier& tier : tiers_) {
    s.tiers.push_back(tier.stats);
    s.tiers.back().store = tier.store->Stats();
  }
  return s;
}

}  // namespace kvault
