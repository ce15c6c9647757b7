#include "kv/kv_layout.h"

#include <string_view>

namespace kvault {
namespace {

Status CheckRange(std::string_view what, uint32_t value, uint32_t max) {
  if (value >= 1 && value <= max) return Status::Ok();
  return InvalidArgumentError("KvLayout: " + std::string(what) + " " +
                              std::to_string(value) + " out of range [1, " +
                              std::to_string(max) + "]");
}

Status CheckRow(const KvLayout& layout, std::string_view side,
                uint32_t head_dim) {
  const uint64_t elems = uint64_t{layout.num_kv_heads} * head_dim;
  const std::string shape = std::to_string(layout.num_kv_heads) + " x " +
                            std::to_string(head_dim) + " = " +
                            std::to_string(elems);
  if (elems > KvLayout::kMaxRowElems) {
    return InvalidArgumentError("KvLayout: " + std::string(side) + " row of " +
                                shape + " elements exceeds " +
                                std::to_string(KvLayout::kMaxRowElems));
  }
  const uint32_t block = DtypeBlockElems(layout.dtype);
  if (elems % block != 0) {
    return InvalidArgumentError(
        "KvLayout: " + std::string(DtypeName(layout.dtype)) +
        " needs row elements in multiples of " + std::to_string(block) + ", " +
        std::string(side) + " row has " + shape);
  }
  return Status::Ok();
}

}  // namespace

Status KvLayout::Validate() const {
  if (!IsSupportedDtype(dtype)) {
    return InvalidArgumentError("KvLayout: unsupported dtype id " +
                                std::to_string(static_cast<int>(dtype)));
  }
  KV_RETURN_IF_ERROR(CheckRange("num_layers", num_layers, kMaxLayers));
  KV_RETURN_IF_ERROR(CheckRange("num_kv_heads", num_kv_heads, kMaxKvHeads));
  KV_RETURN_IF_ERROR(CheckRange("head_dim_k", head_dim_k, kMaxHeadDim));
  KV_RETURN_IF_ERROR(CheckRange("head_dim_v", head_dim_v, kMaxHeadDim));
  KV_RETURN_IF_ERROR(CheckRow(*this, "K", head_dim_k));
  return CheckRow(*this, "V", head_dim_v);
}

uint64_t KvLayout::k_row_bytes() const {
  return DtypeRowBytes(dtype, k_row_elems());
}

uint64_t KvLayout::v_row_bytes() const {
  return DtypeRowBytes(dtype, v_row_elems());
}

uint64_t KvLayout::cell_bytes() const {
  return uint64_t{num_layers} * (k_row_bytes() + v_row_bytes());
}

std::string KvLayout::ToString() const {
  return std::to_string(num_layers) + " layers x " +
         std::to_string(num_kv_heads) + " heads x " +
         std::to_string(head_dim_k) + "/" + std::to_string(head_dim_v) + " " +
         std::string(DtypeName(dtype));
}

}  // namespace kvault
