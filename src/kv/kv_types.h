// Vocabulary types shared by every kv component. Glossary (see
// docs/architecture.md): a *cell* holds the K/V of one token across all
// layers; a *page* is a fixed run of `page_size` consecutive cells; a
// *sequence* is an ordered list of cells owned through whole pages.
#ifndef KVAULT_KV_KV_TYPES_H_
#define KVAULT_KV_KV_TYPES_H_

#include <cstdint>
#include <vector>

#include "core/strong_id.h"

namespace kvault {

struct SeqIdTag { static constexpr const char* kPrefix = "seq#"; };
struct PageIdTag { static constexpr const char* kPrefix = "page#"; };
struct CellIdTag { static constexpr const char* kPrefix = "cell#"; };

using SeqId = StrongId<SeqIdTag, uint32_t>;
using PageId = StrongId<PageIdTag, uint32_t>;
// Global index of a cell in the pool: page * page_size + offset.
using CellId = StrongId<CellIdTag, uint64_t>;

using TokenId = int32_t;
using Pos = int32_t;

// What the bookkeeping knows of one cell of a sequence.
struct TokenPos {
  TokenId token = 0;
  Pos pos = 0;
  friend bool operator==(const TokenPos&, const TokenPos&) = default;
};

// A data move the storage must perform: copy `count` consecutive cells'
// K/V (all layers) from [src, src+count) to [dst, dst+count). Ranges of one
// move never overlap; moves are applied in the order given.
struct CellMove {
  CellId src;
  CellId dst;
  uint64_t count = 0;
  friend bool operator==(const CellMove&, const CellMove&) = default;
};

using CellMoves = std::vector<CellMove>;

// Returns the pages `num_cells` cells occupy at `page_size` cells a page.
constexpr uint64_t PagesForCells(uint64_t num_cells, uint64_t page_size) {
  return (num_cells + page_size - 1) / page_size;
}

}  // namespace kvault

#endif  // KVAULT_KV_KV_TYPES_H_
