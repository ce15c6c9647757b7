#include "kv/kv_storage.h"

#include <cstring>
#include <string>
#include <utility>

#include "core/check.h"

namespace kvault {

StatusOr<KvStorage> KvStorage::Create(const KvLayout& layout,
                                      uint64_t num_cells) {
  KV_RETURN_IF_ERROR(layout.Validate().WithContext("KvStorage::Create"));
  if (num_cells == 0) {
    return InvalidArgumentError("KvStorage::Create: num_cells must be > 0");
  }
  const uint64_t cell_bytes = layout.cell_bytes();
  if (num_cells > kMaxMemoryBytes / cell_bytes) {
    return ResourceExhaustedError(
        "KvStorage::Create: " + std::to_string(num_cells) + " cells x " +
        std::to_string(cell_bytes) + " bytes/cell exceeds the limit of " +
        std::to_string(kMaxMemoryBytes) + " bytes");
  }
  KvStorage storage(layout, num_cells);
  KV_RETURN_IF_ERROR(storage.Allocate());
  return storage;
}

KvStorage::KvStorage(const KvLayout& layout, uint64_t num_cells)
    : layout_(layout), num_cells_(num_cells) {}

Status KvStorage::Allocate() {
  const uint64_t k_bytes = num_cells_ * row_bytes(KvSide::kK);
  const uint64_t v_bytes = num_cells_ * row_bytes(KvSide::kV);
  const uint64_t total = (k_bytes + v_bytes) * layout_.num_layers;
  // One block for every layer: zeroed pages committed on first touch, on
  // huge pages where the kernel grants them. Attention reads a fragmented
  // sequence's cells from anywhere in the pool, and with 4 KiB pages each
  // page of cells costs its own TLB entries.
  StatusOr<HugePageBuffer> block = HugePageBuffer::Allocate(total);
  if (!block.ok()) {
    return ResourceExhaustedError(
        "KvStorage::Create: cannot allocate " + std::to_string(total) +
        " bytes (" + layout_.ToString() + ", " + std::to_string(num_cells_) +
        " cells): " + std::string(block.status().message()));
  }
  block_ = std::move(*block);
  std::byte* next = block_.data();
  for (uint32_t layer = 0; layer < layout_.num_layers; ++layer) {
    k_.push_back(next);
    v_.push_back(next + k_bytes);
    next += k_bytes + v_bytes;
  }
  return Status::Ok();
}

uint64_t KvStorage::row_bytes(KvSide side) const {
  return side == KvSide::kK ? layout_.k_row_bytes() : layout_.v_row_bytes();
}

uint64_t KvStorage::row_elems(KvSide side) const {
  return side == KvSide::kK ? layout_.k_row_elems() : layout_.v_row_elems();
}

std::span<std::byte> KvStorage::RowSpan(KvSide side, uint32_t layer,
                                        CellId first, uint64_t count) const {
  KV_CHECK_LT(layer, layout_.num_layers);
  KV_CHECK_LE(count, num_cells_);
  KV_CHECK_LE(first.value(), num_cells_ - count)
      << "cells [" << first.value() << ", +" << count << ") of " << num_cells_;
  const uint64_t bytes = row_bytes(side);
  std::byte* base = (side == KvSide::kK ? k_ : v_)[layer];
  return {base + first.value() * bytes, count * bytes};
}

std::span<std::byte> KvStorage::Rows(KvSide side, uint32_t layer, CellId first,
                                     uint64_t count) {
  return RowSpan(side, layer, first, count);
}

std::span<const std::byte> KvStorage::Rows(KvSide side, uint32_t layer,
                                           CellId first, uint64_t count) const {
  return RowSpan(side, layer, first, count);
}

void KvStorage::Write(KvSide side, uint32_t layer, CellId cell,
                      std::span<const float> values) {
  KV_CHECK_EQ(values.size(), row_elems(side));
  EncodeRow(layout_.dtype, values, RowSpan(side, layer, cell, 1));
}

void KvStorage::Read(KvSide side, uint32_t layer, CellId cell,
                     std::span<float> out) const {
  KV_CHECK_EQ(out.size(), row_elems(side));
  DecodeRow(layout_.dtype, RowSpan(side, layer, cell, 1), out);
}

void KvStorage::Gather(KvSide side, uint32_t layer,
                       std::span<const CellId> cells,
                       std::span<float> out) const {
  const uint64_t elems = row_elems(side);
  KV_CHECK_EQ(out.size(), cells.size() * elems);
  // Decode each run of consecutive cells in one call: after defrag a
  // sequence is usually one run.
  size_t i = 0;
  while (i < cells.size()) {
    size_t run = 1;
    while (i + run < cells.size() &&
           cells[i + run].value() == cells[i].value() + run) {
      ++run;
    }
    DecodeRow(layout_.dtype, RowSpan(side, layer, cells[i], run),
              out.subspan(i * elems, run * elems));
    i += run;
  }
}

void KvStorage::ApplyMove(const CellMove& move) {
  if (move.count == 0) return;
  const uint64_t src = move.src.value();
  const uint64_t dst = move.dst.value();
  KV_CHECK(src + move.count <= dst || dst + move.count <= src)
      << "overlapping move " << move.src << " -> " << move.dst << " x"
      << move.count;
  for (KvSide side : {KvSide::kK, KvSide::kV}) {
    for (uint32_t layer = 0; layer < layout_.num_layers; ++layer) {
      const std::span<std::byte> from =
          RowSpan(side, layer, move.src, move.count);
      const std::span<std::byte> to =
          RowSpan(side, layer, move.dst, move.count);
      std::memcpy(to.data(), from.data(), to.size());
    }
  }
}

void KvStorage::ApplyMoves(std::span<const CellMove> moves) {
  for (const CellMove& move : moves) ApplyMove(move);
}

}  // namespace kvault
