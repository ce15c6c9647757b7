// PrefixStore: the prefix cache's persistent layer. It writes every full
// page a finished request leaves in the pool as a page record
// (page_record.h) under its content key (page_key.h) into a PageStore, and
// brings stored pages back for a new request whose prompt continues a
// stored chain, so a conversation goes on after a restart (or in another
// instance sharing the store) with only its new tokens evaluated.
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

#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/model_fingerprint.h"
#include "kv/page_key.h"
#include "kv/page_store.h"
#include "kv/state_file.h"

namespace kvault {

struct PrefixStoreStats {
  PageStoreStats store;
  uint64_t pages_published = 0;   // records written
  uint64_t publish_failures = 0;  // records that could not be written
  uint64_t pages_loaded = 0;      // records brought back into the pool
  uint64_t bad_records = 0;       // records refused on reading (removed)
};

class PrefixStore {
 public:
  // Keeps records in `store` for chains rooted at `root` (ChainRoot of the
  // cache's model, layout and page size), written with `save` (its `sync`
  // says whether each record is fsynced).
  PrefixStore(std::unique_ptr<PageStore> store, const ModelFingerprint& model,
              const PageKey& root, SaveOptions save);

  // Writes a record for each full page of `seq` that the store lacks.
  // Returns the first write error (the pages before it are stored); the
  // sequence is never changed.
  Status Publish(const KvCache& cache, SeqId seq);
  // `seq` holds exactly the first `have` cells of `wanted` (a multiple of
  // the page size). Appends the stored pages that continue `wanted`, in
  // order, while each is found, verified and fits in the pool, and while
  // the result stays within `limit` cells; returns the cells `seq` holds
  // afterwards (>= have).
  uint64_t Extend(KvCache* cache, SeqId seq, std::span<const TokenPos> wanted,
                  uint64_t have, uint64_t limit);
  // Returns true when the store has the page of `wanted` that starts at
  // cell `begin` (a multiple of the page size) after the pages before it.
  bool HasPageAt(std::span<const TokenPos> wanted, uint64_t begin,
                 uint32_t page_size) const;
  // Returns the counters.
  PrefixStoreStats Stats() const;

 private:
  // Loads the record of page `key` after `parent`, which must hold
  // `cells`, onto the end of `seq`; false (counted, logged, the record
  // removed when bad) when it cannot.
  bool LoadPage(KvCache* cache, SeqId seq, const PageKey& key,
                const PageKey& parent, std::span<const TokenPos> cells);

  std::unique_ptr<PageStore> store_;
  ModelFingerprint model_;
  PageKey root_;
  SaveOptions save_;
  PrefixStoreStats stats_;
};

}  // namespace kvault

#endif  // KVAULT_KV_PREFIX_STORE_H_
