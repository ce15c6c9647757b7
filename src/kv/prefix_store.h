// PrefixStore: the prefix cache's persistent layer. It writes every full
// page a finished request leaves in the pool as a page record
// (page_record.h) under its content key (page_key.h), and the filled part
// of its last page as a tail record (TailKey), into each of its
// tiers (PageStores, nearest first: the local disk, then a store shared by
// several instances), and brings stored pages back for a new request whose
// prompt continues a stored chain, so a conversation goes on after a
// restart (or in another instance sharing the store) with only its new
// tokens evaluated. A page is fetched from the nearest tier that has it,
// and only when the tier's expected fetch time beats recomputing the page
// at the measured prefill rate; a page found in a farther tier is copied
// into the nearer ones.
//
// Every record read back is checked before it is used: the record must
// name the page and parent asked for, pass every state-file check (model,
// layout, checksums) and hold exactly the prompt's tokens at their
// positions. A record that fails is removed from the store, counted and
// logged, and the request evaluates the rest of its prompt: a bad or
// missing record never fails a request and never yields a wrong token.
//
// Single-threaded, on the owner of the cache (the scheduler thread). Loads
// use the scratch id kPrefixLoadSeq; Extend does nothing under a policy
// that may move cells on append (a restore job's reserved cells must stay).
#ifndef KVAULT_KV_PREFIX_STORE_H_
#define KVAULT_KV_PREFIX_STORE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/record_mac.h"
#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/model_fingerprint.h"
#include "kv/page_key.h"
#include "kv/page_store.h"
#include "kv/state_file.h"

namespace kvault {

// The label page records are sealed under (RecordMac).
inline constexpr char kPageRecordMacLabel[] = "kvault page record v1";

struct PrefixTierStats {
  std::string name;  // the PageStore's name: "disk", "redis"
  PageStoreStats store;
  uint64_t pages_published = 0;   // records written (or queued)
  uint64_t publish_failures = 0;  // records that could not be
  uint64_t pages_loaded = 0;      // records brought back into the pool
  uint64_t bad_records = 0;       // records refused on reading (removed)
  uint64_t fetches_skipped = 0;   // held, but recomputing was expected faster
};

struct PrefixStoreStats {
  std::vector<PrefixTierStats> tiers;  // nearest first
};

// Returns {store}, the tiers of a prefix store with one tier.
std::vector<std::unique_ptr<PageStore>> SingleTier(
    std::unique_ptr<PageStore> store);

class PrefixStore {
 public:
  // Keeps records in `tiers` (non-empty, nearest first) for chains rooted
  // at `root` (ChainRoot of the cache's model, layout and page size),
  // written with `save` (its `sync` says whether each record is fsynced).
  // With `mac` (may be null) every record is sealed with its HMAC tag
  // (label kPageRecordMacLabel) and one read back must carry a right tag,
  // else it is refused as any bad record is: a store writer without the
  // key cannot make this server load a page.
  PrefixStore(std::vector<std::unique_ptr<PageStore>> tiers,
              const ModelFingerprint& model, const PageKey& root,
              SaveOptions save,
              std::shared_ptr<const RecordMac> mac = nullptr);

  // Writes a record for each full page of `seq` into each tier that lacks
  // it. Returns the first write error (other pages and tiers are still
  // written); the sequence is never changed.
  Status Publish(const KvCache& cache, SeqId seq);
  // Adds a measured prefill (`num_tokens` evaluated in `seconds`) to the
  // rate that fetches are weighed against.
  void NotePrefill(uint64_t num_tokens, double seconds);
  // `seq` holds exactly the first `have` cells of `wanted` (a multiple of
  // the page size). Appends the stored pages that continue `wanted`, in
  // order, while each is found, verified and fits in the pool, and while
  // the result stays within `limit` cells, then as much of the stored tail
  // after the last of them (TailKey) as matches `wanted`; returns the cells
  // `seq` holds afterwards (>= have).
  uint64_t Extend(KvCache* cache, SeqId seq, std::span<const TokenPos> wanted,
                  uint64_t have, uint64_t limit);
  // Returns true when a tier has the page of `wanted` that starts at cell
  // `begin` (a multiple of the page size) after the pages before it.
  bool HasPageAt(std::span<const TokenPos> wanted, uint64_t begin,
                 uint32_t page_size) const;
  // Returns true when a tier has a tail record after the whole pages of
  // `wanted` before cell `begin` (a multiple of the page size).
  bool HasTailAt(std::span<const TokenPos> wanted, uint64_t begin,
                 uint32_t page_size) const;
  // Returns, per tier (nearest first), how many leading cells of `wanted`
  // it holds in whole pages of `page_size` (a walk of the key chain).
  std::vector<uint64_t> HeldCells(std::span<const TokenPos> wanted,
                                  uint32_t page_size) const;
  // Returns the counters.
  PrefixStoreStats Stats() const;

 private:
  struct Tier {
    std::unique_ptr<PageStore> store;
    PrefixTierStats stats;
  };
  // Records one tier fetched for a run of the chain in one round trip
  // (PageStore::GetMany), kept for the pages after the one asked for.
  struct ReadAhead {
    size_t tier = SIZE_MAX;
    size_t first = 0;  // the chain index of files[0]
    std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>> files;
  };
  // Pages a fetch asks a tier for at once: a remote store answers them in
  // one round trip; at most this many records wait in memory.
  static constexpr size_t kReadAheadPages = 8;

  // Brings page keys[i] (holding `cells`) onto the end of `seq` from the
  // nearest tier that has it and is worth fetching from (reading ahead
  // into `ahead`); copies the record into the nearer tiers. False when no
  // tier could.
  bool FetchPage(KvCache* cache, SeqId seq, std::span<const PageKey> keys,
                 size_t i, std::span<const TokenPos> cells, ReadAhead* ahead);
  // Returns true when `tier` holds `key` and fetching its `num_bytes` is
  // expected to beat recomputing `num_tokens` (counted as skipped if not).
  bool WorthFetching(Tier& tier, const PageKey& key, uint64_t num_bytes,
                     uint64_t num_tokens);
  // Copies `record` of page `key`, read from tier `t`, into tiers [0, t).
  void CopyNearer(size_t t, const PageKey& key, const RandomAccessFile& record);
  // Appends to `seq` the longest prefix of `cells` the tail record after
  // `parent` holds, from the nearest tier that has it; returns its length.
  uint64_t FetchTail(KvCache* cache, SeqId seq, const PageKey& parent,
                     std::span<const TokenPos> cells);
  // Restores `record` (checked to be `key` after `parent`) into
  // kPrefixLoadSeq.
  Status LoadRecord(KvCache* cache, const RandomAccessFile& record,
                    const PageKey& key, const PageKey& parent);
  // Counts, logs and removes the bad record `key` of `tier`.
  void Refuse(Tier& tier, const PageKey& key, const Status& why);
  // Loads tail `record` and appends the part of it that starts `cells` to
  // `seq`; returns that part's length (0: none matched, or it could not).
  uint64_t LoadTail(KvCache* cache, SeqId seq, Tier& tier,
                    const RandomAccessFile& record, const PageKey& key,
                    const PageKey& parent, std::span<const TokenPos> cells);
  // Loads `record` of page `key` from `tier` onto the end of `seq`; false
  // (counted, logged, the record removed when bad) when it cannot.
  bool LoadPage(KvCache* cache, SeqId seq, Tier& tier,
                const RandomAccessFile& record, const PageKey& key,
                const PageKey& parent, std::span<const TokenPos> cells);
  // Returns the expected seconds to recompute `num_tokens` tokens.
  double RecomputeSeconds(uint64_t num_tokens) const;

  std::vector<Tier> tiers_;
  ModelFingerprint model_;
  PageKey root_;
  SaveOptions save_;
  std::shared_ptr<const RecordMac> mac_;
  double prefill_seconds_per_token_ = 0;  // moving average; 0: not measured
};

}  // namespace kvault

#endif  // KVAULT_KV_PREFIX_STORE_H_
