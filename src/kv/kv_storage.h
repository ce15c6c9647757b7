// KvStorage: the K/V data of every cell of the pool, for every layer, in the
// layout's dtype. It stores and moves bytes; which cell belongs to which
// sequence is the SequenceTable's business.
#ifndef KVAULT_KV_KV_STORAGE_H_
#define KVAULT_KV_KV_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/huge_page_buffer.h"
#include "core/status_or.h"
#include "kv/kv_layout.h"
#include "kv/kv_types.h"

namespace kvault {

class KvStorage {
 public:
  // Refuses pools above this size before trying to allocate them.
  static constexpr uint64_t kMaxMemoryBytes = uint64_t{1} << 48;

  // Allocates zeroed storage for `num_cells` cells. InvalidArgument for a
  // bad layout or zero cells; ResourceExhausted when the size is over
  // kMaxMemoryBytes or the allocation fails.
  static StatusOr<KvStorage> Create(const KvLayout& layout, uint64_t num_cells);

  // Movable (the moved-from storage must not be used), not copyable.
  KvStorage(KvStorage&&) noexcept = default;
  KvStorage& operator=(KvStorage&&) noexcept = default;

  // Returns the layout the storage was created with.
  const KvLayout& layout() const { return layout_; }
  // Returns the number of cells.
  uint64_t num_cells() const { return num_cells_; }
  // Returns the bytes held: num_cells * layout().cell_bytes().
  uint64_t memory_bytes() const { return num_cells_ * layout_.cell_bytes(); }

  // Returns the raw encoded `side` rows of cells [first, first + count) in
  // `layer`, which are contiguous: count * row bytes of that side.
  std::span<std::byte> Rows(KvSide side, uint32_t layer, CellId first,
                            uint64_t count = 1);
  // Const version of Rows.
  std::span<const std::byte> Rows(KvSide side, uint32_t layer, CellId first,
                                  uint64_t count = 1) const;
  // Encodes `values` (the side's row_elems floats) into the `side` row of
  // `cell`.
  void Write(KvSide side, uint32_t layer, CellId cell,
             std::span<const float> values);
  // Decodes the `side` row of `cell` into `out` (row_elems floats).
  void Read(KvSide side, uint32_t layer, CellId cell,
            std::span<float> out) const;
  // Decodes the `side` rows of `cells`, in the given order, into
  // out [cells.size(), row_elems].
  void Gather(KvSide side, uint32_t layer, std::span<const CellId> cells,
              std::span<float> out) const;

  // Copies each move's cells (K and V of all layers) from src to dst, in the
  // order given; each move's ranges must be in bounds and must not overlap.
  void ApplyMoves(std::span<const CellMove> moves);

 private:
  KvStorage(const KvLayout& layout, uint64_t num_cells);
  Status Allocate();

  uint64_t row_bytes(KvSide side) const;
  uint64_t row_elems(KvSide side) const;
  // Returns the rows of [first, first + count) on `side`; checks bounds.
  std::span<std::byte> RowSpan(KvSide side, uint32_t layer, CellId first,
                               uint64_t count) const;
  void ApplyMove(const CellMove& move);

  KvLayout layout_;
  uint64_t num_cells_ = 0;
  HugePageBuffer block_;       // every layer's K and V rows
  std::vector<std::byte*> k_;  // per layer: [num_cells, k_row_bytes]
  std::vector<std::byte*> v_;  // per layer: [num_cells, v_row_bytes]
};

}  // namespace kvault

#endif  // KVAULT_KV_KV_STORAGE_H_
