// QuantizeModel: `kvault quantize` — converts an F32/F16/BF16 GGUF model to
// a quantization mix the way llama-quantize does (no importance matrix):
// the same per-tensor types (quantize_plan.h), the same bytes per tensor
// (quantize_rows.h), the tensors in llama-quantize's order, every metadata
// entry copied in order with general.quantization_version (2) and
// general.file_type (the mix's llama_ftype) set last, as llama-quantize's
// gguf_set_val does. Tensors that are not quantized (norms, 1-D) are copied
// byte for byte.
#ifndef KVAULT_MODEL_MODEL_QUANTIZER_H_
#define KVAULT_MODEL_MODEL_QUANTIZER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "model/ggml_types.h"
#include "model/gguf_file.h"
#include "model/quantize_plan.h"

namespace kvault {

// Reported after each tensor is written.
struct QuantizeProgress {
  size_t index = 0;  // 1-based
  size_t count = 0;
  std::string_view name;
  GgmlType from = GgmlType::kF32;
  GgmlType to = GgmlType::kF32;
  uint64_t input_bytes_done = 0;
  uint64_t input_bytes_total = 0;
  uint64_t output_bytes_done = 0;
};

struct ModelQuantizeOptions {
  QuantizePlanOptions plan;
  int threads = 0;  // 0: one per hardware thread
  std::function<void(const QuantizeProgress&)> progress;  // may be empty
};

struct ModelQuantizeResult {
  uint64_t num_tensors = 0;
  uint64_t num_quantized = 0;  // tensors whose type changed
  uint64_t num_fallbacks = 0;  // tensors that got a fallback type
  uint64_t input_tensor_bytes = 0;
  uint64_t output_tensor_bytes = 0;
  uint64_t file_bytes = 0;
};

// Reads the facts the type rules need ({arch}.block_count, head counts,
// expert count) from `file`'s metadata; InvalidArgument naming a missing
// key.
StatusOr<QuantizeModelShape> ReadQuantizeModelShape(const GgufFile& file);

// Writes the quantized model to `out` (neither synced nor closed).
// InvalidArgument for a tensor that must be converted but is not f32, f16
// or bf16, or whose rows are not a multiple of its new type's block (both
// name the tensor), and the errors of ReadQuantizeModelShape and
// PlanQuantization.
StatusOr<ModelQuantizeResult> QuantizeModel(const GgufFile& in,
                                            const ModelQuantizeOptions& options,
                                            WritableFile* out);

// Quantizes the file `in_path` into `out_path` durably: written to
// "<out_path>.tmp", synced, closed and renamed; the temporary is removed on
// failure.
StatusOr<ModelQuantizeResult> QuantizeModelFile(
    Env* env, const std::string& in_path, const std::string& out_path,
    const ModelQuantizeOptions& options);

// Plans `file`'s tensors (PlanQuantization over its tensor infos).
StatusOr<std::vector<PlannedType>> PlanFileQuantization(
    const GgufFile& file, const QuantizePlanOptions& options);

}  // namespace kvault

#endif  // KVAULT_MODEL_MODEL_QUANTIZER_H_
