// The per-tensor type choice of llama-quantize (llama.cpp's
// llama_tensor_get_type, no importance matrix) for Llama-family models:
// given a file type ("mix") such as Q4_K_M, which ggml type each tensor
// gets. Rules, as llama.cpp applies them:
//   * Only 2-D+ tensors whose names end in "weight" are quantized, never
//     norms ("_norm.weight") nor a few small special tensors; the others
//     keep their type.
//   * output.weight (and token_embd.weight when the model has no
//     output.weight, i.e. tied embeddings) gets Q6_K unless the mix's type
//     is Q8_0 (or Q8_0 when its rows are not a multiple of the block size).
//   * attn_v / ffn_down / attn_output get more bits in some mixes, by layer
//     position: use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
//     (i - n/8) % 3 == 2, with i counted over the tensors of that kind in
//     llama-quantize's order (see LlamaQuantizeOrder).
//   * A type whose block does not divide a tensor's rows falls back
//     (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
//     IQ4_XS -> IQ4_NL), and to F16 when 32 does not divide them either.
//   * --pure skips the mix rules (the fallback still applies);
//     --output-tensor-type / --token-embedding-type set those two tensors'
//     types outright.
#ifndef KVAULT_MODEL_QUANTIZE_PLAN_H_
#define KVAULT_MODEL_QUANTIZE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "model/ggml_types.h"
#include "model/gguf_file.h"

namespace kvault {

// llama.cpp's llama_ftype values (general.file_type) of the mixes kvault
// writes.
enum class QuantFileType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
};

// Parses a mix name as llama-quantize spells it, case-insensitive: F32,
// F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L,
// Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS, and the aliases
// Q3_K (= Q3_K_M), Q4_K (= Q4_K_M), Q5_K (= Q5_K_M). InvalidArgument
// listing the names otherwise.
StatusOr<QuantFileType> ParseQuantFileType(std::string_view name);
// Returns the canonical name, e.g. "Q4_K_M".
std::string_view QuantFileTypeName(QuantFileType ftype);
// Returns the mix's base tensor type (Q4_K_M -> q4_K, F32 -> f32).
GgmlType QuantFileTypeBaseType(QuantFileType ftype);
// Returns the mix whose base type is `type` (q4_K -> Q4_K_M, q3_K ->
// Q3_K_M, q5_K -> Q5_K_M); InvalidArgument for a type no mix is based on.
StatusOr<QuantFileType> QuantFileTypeForBaseType(GgmlType type);

struct QuantizePlanOptions {
  QuantFileType ftype = QuantFileType::kQ8_0;
  bool pure = false;
  std::optional<GgmlType> output_tensor_type;
  std::optional<GgmlType> token_embedding_type;
};

// The model facts the rules depend on.
struct QuantizeModelShape {
  std::string architecture = "llama";
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t n_expert = 0;  // <arch>.expert_count
};

// One tensor to plan: name, shape (ne0 first) and current type.
struct PlanTensor {
  std::string name;
  std::vector<uint64_t> shape;
  GgmlType type = GgmlType::kF32;
};

// One tensor's outcome.
struct PlannedType {
  GgmlType type = GgmlType::kF32;
  bool quantized = false;  // false: copied as is (not a quantizable tensor)
  bool fell_back = false;  // the rows forced a fallback type
};

// Returns llama-quantize's processing (and output) order of `tensors`:
// tensors outside blocks first, then by block number, each group sorted
// by name. The result holds indices into `tensors`.
std::vector<size_t> LlamaQuantizeOrder(const std::vector<PlanTensor>& tensors);

// Returns each tensor's type (same order as `tensors`). InvalidArgument for
// a model the rules do not cover (falcon) and for a
// tensor whose rows fit neither its type nor a fallback (naming it).
StatusOr<std::vector<PlannedType>> PlanQuantization(
    const std::vector<PlanTensor>& tensors, const QuantizeModelShape& model,
    const QuantizePlanOptions& options);

}  // namespace kvault

#endif  // KVAULT_MODEL_QUANTIZE_PLAN_H_
