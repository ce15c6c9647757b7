#include "model/model_quantizer.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "model/gguf_writer.h"
#include "model/quantize.h"

namespace kvault {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION
constexpr uint64_t kChunkValues = uint64_t{1} << 22;

bool IsFloat(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

std::vector<PlanTensor> ToPlanTensors(const GgufFile& file) {
  std::vector<PlanTensor> tensors;
  for (const GgufTensorInfo& t : file.tensors()) {
    tensors.push_back({t.name, t.shape, t.type});
  }
  return tensors;
}

Status CheckConvertible(const GgufTensorInfo& t, GgmlType to) {
  if (!IsFloat(t.type)) {
    return InvalidArgumentError(
        "tensor " + t.name + " is " + std::string(GgmlTypeName(t.type)) +
        "; kvault quantize converts f32, f16 and bf16 tensors only");
  }
  const uint32_t block = GetGgmlTypeInfo(to).block_size;
  if (t.shape[0] % block != 0) {
    return InvalidArgumentError(
        "tensor " + t.name + " has rows of " + std::to_string(t.shape[0]) +
        " values, not a multiple of type " + std::string(GgmlTypeName(to)) +
        "'s block of " + std::to_string(block));
  }
  return Status::Ok();
}

// Quantizes rows [0, nrows) of `values` (ne0 each) into `bytes` on up to
// `threads` threads; rows are independent, so the bytes do not depend on
// the split.
Status QuantizeRows(GgmlType to, uint64_t ne0, std::span<const float> values,
                    std::span<std::byte> bytes, int threads) {
  const uint64_t nrows = values.size() / ne0;
  const uint64_t row_bytes = bytes.size() / nrows;
  const uint64_t parts = std::min<uint64_t>(threads, nrows);
  std::vector<Status> status(parts);
  auto work = [&](uint64_t p) {
    const uint64_t r0 = nrows * p / parts;
    const uint64_t r1 = nrows * (p + 1) / parts;
    status[p] =
        QuantizeRow(to, values.subspan(r0 * ne0, (r1 - r0) * ne0),
                    bytes.subspan(r0 * row_bytes, (r1 - r0) * row_bytes));
  };
  std::vector<std::thread> pool;
  for (uint64_t p = 1; p < parts; ++p) pool.emplace_back(work, p);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const Status& s : status) KV_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Streams one converted tensor, a bounded number of rows at a time.
Status WriteConverted(const GgufFile& in, const GgufTensorInfo& t, GgmlType to,
                      int threads, GgufWriter* w) {
  const uint64_t ne0 = t.shape[0];
  const uint64_t nrows = t.num_elements / ne0;
  const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkValues / ne0);
  KV_ASSIGN_OR_RETURN(uint64_t in_row, GgmlRowBytes(t.type, ne0));
  KV_ASSIGN_OR_RETURN(uint64_t out_row, GgmlRowBytes(to, ne0));
  const std::span<const std::byte> data = in.TensorData(t);
  std::vector<float> values;
  std::vector<std::byte> bytes;
  for (uint64_t r = 0; r < nrows; r += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, nrows - r);
    values.resize(n * ne0);
    bytes.resize(n * out_row);
    KV_RETURN_IF_ERROR(
        DequantizeRow(t.type, data.subspan(r * in_row, n * in_row), values));
    KV_RETURN_IF_ERROR(QuantizeRows(to, ne0, values, bytes, threads));
    KV_RETURN_IF_ERROR(w->AppendTensorData(bytes));
  }
  return Status::Ok();
}

Status AddMetadata(const GgufFile& in, QuantFileType ftype, GgufWriter* w) {
  for (const GgufMetadataEntry& e : in.metadata()) {
    if (e.key == "general.quantization_version" ||
        e.key == "general.file_type" || e.key.starts_with("split.")) {
      continue;
    }
    KV_RETURN_IF_ERROR(w->AddMetadata(e.key, e.value));
  }
  KV_RETURN_IF_ERROR(w->AddMetadata("general.quantization_version",
                                    GgufValue::Uint32(kQuantizationVersion)));
  return w->AddMetadata("general.file_type",
                        GgufValue::Uint32(static_cast<uint32_t>(ftype)));
}

}  // namespace

StatusOr<QuantizeModelShape> ReadQuantizeModelShape(const GgufFile& file) {
  QuantizeModelShape shape;
  KV_ASSIGN_OR_RETURN(shape.architecture,
                      file.GetString("general.architecture"));
  const std::string& a = shape.architecture;
  KV_ASSIGN_OR_RETURN(uint64_t n_layer, file.GetUint(a + ".block_count"));
  KV_ASSIGN_OR_RETURN(uint64_t n_head,
                      file.GetUint(a + ".attention.head_count"));
  uint64_t n_head_kv = n_head;
  if (file.Has(a + ".attention.head_count_kv")) {
    KV_ASSIGN_OR_RETURN(n_head_kv,
                        file.GetUint(a + ".attention.head_count_kv"));
  }
  uint64_t n_expert = 0;
  if (file.Has(a + ".expert_count")) {
    KV_ASSIGN_OR_RETURN(n_expert, file.GetUint(a + ".expert_count"));
  }
  shape.n_layer = static_cast<uint32_t>(n_layer);
  shape.n_head = static_cast<uint32_t>(n_head);
  shape.n_head_kv = static_cast<uint32_t>(n_head_kv);
  shape.n_expert = static_cast<uint32_t>(n_expert);
  return shape;
}

StatusOr<std::vector<PlannedType>> PlanFileQuantization(
    const GgufFile& file, const QuantizePlanOptions& options) {
  KV_ASSIGN_OR_RETURN(QuantizeModelShape shape, ReadQuantizeModelShape(file));
  return PlanQuantization(ToPlanTensors(file), shape, options);
}

StatusOr<ModelQuantizeResult> QuantizeModel(const GgufFile& in,
                                            const ModelQuantizeOptions& options,
                                            WritableFile* out) {
  KV_ASSIGN_OR_RETURN(std::vector<PlannedType> plan,
                      PlanFileQuantization(in, options.plan));
  const int threads =
      options.threads > 0
          ? options.threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    if (plan[i].type != t.type) {
      KV_RETURN_IF_ERROR(CheckConvertible(t, plan[i].type));
    }
  }
  GgufWriterOptions wo;
  wo.alignment = static_cast<uint32_t>(in.alignment());
  GgufWriter writer(out, wo);
  KV_RETURN_IF_ERROR(AddMetadata(in, options.plan.ftype, &writer));
  const std::vector<size_t> order = LlamaQuantizeOrder(ToPlanTensors(in));
  ModelQuantizeResult result;
  for (size_t i : order) {
    const GgufTensorInfo& t = in.tensors()[i];
    KV_RETURN_IF_ERROR(writer.AddTensorInfo(t.name, plan[i].type, t.shape));
    result.input_tensor_bytes += t.size_bytes;
  }
  KV_RETURN_IF_ERROR(writer.WriteHeader());
  QuantizeProgress progress;
  progress.count = order.size();
  progress.input_bytes_total = result.input_tensor_bytes;
  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensorInfo& t = in.tensors()[order[k]];
    const PlannedType& p = plan[order[k]];
    Status s = p.type == t.type
                   ? writer.WriteTensorData(in.TensorData(t))
                   : WriteConverted(in, t, p.type, threads, &writer);
    KV_RETURN_IF_ERROR(s);
    result.num_quantized += p.type != t.type ? 1 : 0;
    result.num_fallbacks += p.fell_back ? 1 : 0;
    result.output_tensor_bytes += writer.tensors()[k].size_bytes;
    if (options.progress) {
      progress.index = k + 1;
      progress.name = t.name;
      progress.from = t.type;
      progress.to = p.type;
      progress.input_bytes_done += t.size_bytes;
      progress.output_bytes_done = result.output_tensor_bytes;
      options.progress(progress);
    }
  }
  KV_RETURN_IF_ERROR(writer.Finish());
  result.num_tensors = order.size();
  result.file_bytes = writer.bytes_written();
  return result;
}

StatusOr<ModelQuantizeResult> QuantizeModelFile(
    Env* env, const std::string& in_path, const std::string& out_path,
    const ModelQuantizeOptions& options) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> in, GgufFile::Open(in_path));
  const std::string tmp = out_path + ".tmp";
  StatusOr<ModelQuantizeResult> result =
      [&]() -> StatusOr<ModelQuantizeResult> {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                        env->NewWritableFile(tmp));
    KV_ASSIGN_OR_RETURN(ModelQuantizeResult r,
                        QuantizeModel(*in, options, file.get()));
    KV_RETURN_IF_ERROR(file->Sync());
    KV_RETURN_IF_ERROR(file->Close());
    KV_RETURN_IF_ERROR(env->RenameFile(tmp, out_path));
    KV_RETURN_IF_ERROR(env->SyncDir(DirName(out_path)));
    return r;
  }();
  if (!result.ok()) {
    (void)env->RemoveFile(tmp);
    return result.status().WithContext("writing " + out_path);
  }
  return result;
}

}  // namespace kvault
