// libFuzzer target for the GGUF reader. Every input goes through
// GgufFile::FromBuffer; a file that parses then has every accessor called on
// every metadata key, every tensor's bytes read, its hyperparameters read
// and its fingerprint computed. Properties checked on accepted files:
//   - every tensor's bytes lie inside the file, after the data offset;
//   - every tensor of a type kvault computes with (the K-quants, legacy and
//     IQ4 types included) dequantizes row by row, and a small 2-D one runs
//     through MatMul, whatever its bytes (NaN scales included);
//   - rewriting the file with GgufWriter (same version and alignment) gives
//     a file that parses to equal metadata, tensor infos and bytes, and the
//     same fingerprint (the fingerprint ignores layout).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_assert.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/kernels/kernels.h"
#include "model/llama_hparams.h"
#include "model/model_fingerprint.h"
#include "model/quantize.h"

namespace kvault {
namespace {

void CallEveryAccessor(const GgufFile& f) {
  for (const GgufMetadataEntry& e : f.metadata()) {
    FUZZ_ASSERT(f.Find(e.key) == &e.value);
    (void)e.value.DebugString();
    (void)f.GetString(e.key);
    (void)f.GetUint(e.key);
    (void)f.GetInt(e.key);
    (void)f.GetFloat(e.key);
    (void)f.GetBool(e.key);
    (void)f.GetStringArray(e.key);
    (void)f.GetFloatArray(e.key);
    (void)f.GetIntArray(e.key);
    for (uint64_t i = 0; i < e.value.array_size() && i < 4; ++i) {
      (void)e.value.Element(i).DebugString();
    }
  }
  const std::byte* begin = f.bytes().data();
  for (const GgufTensorInfo& t : f.tensors()) {
    FUZZ_ASSERT(f.FindTensor(t.name) == &t);
    const std::span<const std::byte> data = f.TensorData(t);
    FUZZ_ASSERT(data.size() == t.size_bytes);
    FUZZ_ASSERT(data.data() >= begin + f.data_offset());
    FUZZ_ASSERT(data.data() + data.size() <= begin + f.file_size());
    volatile uint8_t sink = 0;
    if (!data.empty()) sink = static_cast<uint8_t>(data.back());
    (void)sink;
  }
  (void)ReadLlamaHparams(f);
}

// Dequantizes the first rows of every computable tensor and multiplies a
// small 2-D one by a vector: the block decoders and dot kernels must accept
// any bytes.
void ExerciseKernels(const GgufFile& f) {
  constexpr uint64_t kMaxValues = 1 << 16;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!GetGgmlTypeInfo(t.type).supported_for_compute) continue;
    const uint64_t cols = t.ne(0);
    const uint64_t rows = t.num_elements / cols;
    if (cols > kMaxValues) continue;
    const size_t row_bytes = t.size_bytes / rows;
    const auto data = f.TensorData(t);
    std::vector<float> row(cols);
    for (uint64_t r = 0; r < rows && r < 2; ++r) {
      const Status s =
          DequantizeRow(t.type, data.subspan(r * row_bytes, row_bytes), row);
      FUZZ_ASSERT(s.ok());
    }
    if (t.shape.size() == 2 && rows * cols <= kMaxValues) {
      std::vector<float> x(2 * cols, 0.5f), y(2 * rows);
      const kernels::MatrixView view{t.type, static_cast<int64_t>(rows),
                                     static_cast<int64_t>(cols), data.data(),
                                     row_bytes};
      kernels::Kernels(kernels::BestIsa())
          .MatMul(view, x.data(), 2, y.data(), nullptr);
    }
  }
}

void CheckRewrite(const GgufFile& f, const ModelFingerprint& fp) {
  std::vector<std::string> data;
  for (const GgufTensorInfo& t : f.tensors()) {
    const auto bytes = f.TensorData(t);
    data.emplace_back(reinterpret_cast<const char*>(bytes.data()),
                      bytes.size());
  }
  GgufWriterOptions options;
  options.version = f.version();
  options.alignment = static_cast<uint32_t>(f.alignment());
  // The writer refuses a general.alignment stored as another integer type
  // than uint32; such files are simply not rewritten.
  StatusOr<std::string> image =
      BuildGgufImage(f.metadata(), f.tensors(), data, options);
  if (!image.ok()) return;
  auto again =
      GgufFile::FromBuffer(std::make_shared<const std::string>(*image));
  FUZZ_ASSERT(again.ok());
  const GgufFile& g = **again;
  FUZZ_ASSERT(g.metadata().size() == f.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    FUZZ_ASSERT(g.metadata()[i].key == f.metadata()[i].key);
    FUZZ_ASSERT(g.metadata()[i].value == f.metadata()[i].value);
  }
  FUZZ_ASSERT(g.tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    FUZZ_ASSERT(g.tensors()[i].name == f.tensors()[i].name);
    FUZZ_ASSERT(g.tensors()[i].shape == f.tensors()[i].shape);
    FUZZ_ASSERT(g.tensors()[i].type == f.tensors()[i].type);
    const auto a = f.TensorData(f.tensors()[i]);
    const auto b = g.TensorData(g.tensors()[i]);
    FUZZ_ASSERT(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  FUZZ_ASSERT(ComputeModelFingerprint(g) == fp);
}

}  // namespace
}  // namespace kvault

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvault;
  auto bytes = std::make_shared<const std::string>(
      reinterpret_cast<const char*>(data), size);
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer(bytes);
  if (!file.ok()) {
    FUZZ_ASSERT(!file.status().message().empty());
    return 0;
  }
  CallEveryAccessor(**file);
  ExerciseKernels(**file);
  const ModelFingerprint fp = ComputeModelFingerprint(**file);
  FUZZ_ASSERT(ComputeModelFingerprint(**file) == fp);
  CheckRewrite(**file, fp);
  return 0;
}
