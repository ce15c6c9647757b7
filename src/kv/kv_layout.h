// KvLayout: the shape of one cell's K/V across all layers. It is the only
// thing the kv layer knows of a model.
#ifndef KVAULT_KV_KV_LAYOUT_H_
#define KVAULT_KV_KV_LAYOUT_H_

#include <cstdint>
#include <string>

#include "core/status.h"
#include "kv/kv_dtype.h"

namespace kvault {

// Which of a cell's two rows: the key row or the value row.
enum class KvSide { kK, kV };

struct KvLayout {
  // Upper limits keep every size product far from overflowing uint64_t:
  // cell_bytes() <= 1024 layers * 2 rows * 2^20 elems * 4 bytes = 2^33.
  static constexpr uint32_t kMaxLayers = 1024;
  static constexpr uint32_t kMaxKvHeads = 1024;
  static constexpr uint32_t kMaxHeadDim = 16384;
  static constexpr uint64_t kMaxRowElems = uint64_t{1} << 20;

  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim_k = 0;
  uint32_t head_dim_v = 0;
  KvDtype dtype = KvDtype::kF16;

  // Returns OK when every dimension is in range and rows suit the dtype
  // (Q8_0 rows must hold whole 32-value blocks).
  Status Validate() const;

  // Returns the values in one K row: num_kv_heads * head_dim_k.
  uint64_t k_row_elems() const { return uint64_t{num_kv_heads} * head_dim_k; }
  // Returns the values in one V row: num_kv_heads * head_dim_v.
  uint64_t v_row_elems() const { return uint64_t{num_kv_heads} * head_dim_v; }
  // Returns the encoded bytes of one K row; requires Validate().ok().
  uint64_t k_row_bytes() const;
  // Returns the encoded bytes of one V row; requires Validate().ok().
  uint64_t v_row_bytes() const;
  // Returns the bytes of one cell: K and V rows of every layer.
  uint64_t cell_bytes() const;

  // Returns e.g. "16 layers x 8 heads x 64/64 f16" (head_dim_k/head_dim_v).
  std::string ToString() const;

  friend bool operator==(const KvLayout&, const KvLayout&) = default;
};

}  // namespace kvault

#endif  // KVAULT_KV_KV_LAYOUT_H_
