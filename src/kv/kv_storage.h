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

  // Returns the raw encoded K row of `cell` in `layer`.
  std::span<std::byte> KRow(uint32_t layer, CellId cell);
  // Const version of KRow.
  std::span<const std::byte> KRow(uint32_t layer, CellId cell) const;
  // Returns the raw encoded V row of `cell` in `layer`.
  std::span<std::byte> VRow(uint32_t layer, CellId cell);
  // Const version of VRow.
  std::span<const std::byte> VRow(uint32_t layer, CellId cell) const;
  // Returns the raw K rows of cells [first, first + count) in `layer`, which
  // are contiguous: count * k_row_bytes bytes.
  std::span<std::byte> KRows(uint32_t layer, CellId first, uint64_t count);
  // Const version of KRows.
  std::span<const std::byte> KRows(uint32_t layer, CellId first,
                                   uint64_t count) const;
  // Returns the raw V rows of cells [first, first + count) in `layer`.
  std::span<std::byte> VRows(uint32_t layer, CellId first, uint64_t count);
  // Const version of VRows.
  std::span<const std::byte> VRows(uint32_t layer, CellId first,
                                   uint64_t count) const;

  // Encodes `values` (k_row_elems floats) into the K row of `cell`.
  void WriteK(uint32_t layer, CellId cell, std::span<const float> values);
  // Encodes `values` (v_row_elems floats) into the V row of `cell`.
  void WriteV(uint32_t layer, CellId cell, std::span<const float> values);
  // Decodes the K row of `cell` into `out` (k_row_elems floats).
  void ReadK(uint32_t layer, CellId cell, std::span<float> out) const;
  // Decodes the V row of `cell` into `out` (v_row_elems floats).
  void ReadV(uint32_t layer, CellId cell, std::span<float> out) const;
  // Decodes the K rows of `cells`, in the given order, into
  // out [cells.size(), k_row_elems].
  void GatherK(uint32_t layer, std::span<const CellId> cells,
               std::span<float> out) const;
  // Decodes the V rows of `cells` into out [cells.size(), v_row_elems].
  void GatherV(uint32_t layer, std::span<const CellId> cells,
               std::span<float> out) const;

  // Copies each move's cells (K and V of all layers) from src to dst, in the
  // order given; each move's ranges must be in bounds and must not overlap.
  void ApplyMoves(std::span<const CellMove> moves);

 private:
  enum class Side { kK, kV };

  KvStorage(const KvLayout& layout, uint64_t num_cells);
  Status Allocate();

  uint64_t row_bytes(Side side) const;
  uint64_t row_elems(Side side) const;
  // Returns the rows of [first, first + count) on `side`; checks bounds.
  std::span<std::byte> Rows(Side side, uint32_t layer, CellId first,
                            uint64_t count) const;
  void Write(Side side, uint32_t layer, CellId cell,
             std::span<const float> values);
  void Read(Side side, uint32_t layer, CellId cell, std::span<float> out) const;
  void Gather(Side side, uint32_t layer, std::span<const CellId> cells,
              std::span<float> out) const;
  void ApplyMove(const CellMove& move);

  KvLayout layout_;
  uint64_t num_cells_ = 0;
  HugePageBuffer block_;       // every layer's K and V rows
  std::vector<std::byte*> k_;  // per layer: [num_cells, k_row_bytes]
  std::vector<std::byte*> v_;  // per layer: [num_cells, v_row_bytes]
};

}  // namespace kvault

#endif  // KVAULT_KV_KV_STORAGE_H_
