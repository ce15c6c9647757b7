// LlamaModel: a loaded, validated Llama-family GGUF model: hyperparameters,
// architecture description, tensor views into the memory-mapped file, the
// tokenizer and the fingerprint KV state files are bound to. Immutable after
// loading, so any number of InferenceContexts may share one.
#ifndef KVAULT_MODEL_LLAMA_MODEL_H_
#define KVAULT_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/status_or.h"
#include "kv/kv_dtype.h"
#include "kv/kv_layout.h"
#include "kv/model_fingerprint.h"
#include "model/arch_spec.h"
#include "model/gguf_file.h"
#include "model/kernels/kernels.h"
#include "model/llama_hparams.h"
#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace kvault {

// Fills the hparams only some architectures have (the sliding window and
// its layer pattern, the soft-caps) from `file` for `arch`, with
// llama.cpp's defaults where a key is absent; InvalidArgument for values
// out of range, Unimplemented for variants kvault has not checked.
Status ReadArchHparams(const GgufFile& file, const ArchSpec& arch,
                       LlamaHparams* h);

class LlamaModel {
 public:
  // Loads the GGUF at `path` (read into memory by default, see LoadMode)
  // and validates it (hparams, architecture, every tensor's name, shape and
  // type, tokenizer); errors name the path. Unimplemented names an
  // unsupported architecture or tensor type. Matrices are laid out for the
  // kernels of `isa` (the ComputeBackendOptions::isa that will run it),
  // where a file read into memory allows it.
  static StatusOr<std::unique_ptr<LlamaModel>> Load(
      const std::string& path, LoadMode mode = LoadMode::kRead,
      kernels::Isa isa = kernels::BestIsa());
  // Validates an already parsed file, as Load does.
  static StatusOr<std::unique_ptr<LlamaModel>> FromGguf(
      std::unique_ptr<GgufFile> file, kernels::Isa isa = kernels::BestIsa());

  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Returns the hyperparameters.
  const LlamaHparams& hparams() const { return hparams_; }
  // Returns the architecture description.
  const ArchSpec& arch() const { return arch_; }
  // Returns the tensor views.
  const LlamaWeights& weights() const { return weights_; }
  // Returns the tokenizer built from the file's vocabulary.
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Returns the model's identity for state files.
  const ModelFingerprint& fingerprint() const { return fingerprint_; }
  // Returns the parsed file the weights point into.
  const GgufFile& file() const { return *file_; }
  // Returns the number of vocabulary entries (logits per token).
  uint32_t n_vocab() const { return hparams_.n_vocab; }

  // Returns the KV cell layout this model needs with element type `dtype`
  // (validate it: Q8_0 needs K/V rows of whole 32-value blocks).
  KvLayout KvLayoutFor(KvDtype dtype) const;
  // Returns the bytes of all tensors.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Returns the bytes one decode step streams: every tensor but a token
  // embedding that is not also the output matrix (a step reads one row),
  // and of the expert tensors the n_expert_used experts a token runs.
  uint64_t decode_bytes() const { return decode_bytes_; }
  // Returns the number of weight elements.
  uint64_t num_parameters() const { return num_parameters_; }

 private:
  LlamaModel() = default;

  std::unique_ptr<GgufFile> file_;
  LlamaHparams hparams_;
  ArchSpec arch_;
  LlamaWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelFingerprint fingerprint_;
  uint64_t weight_bytes_ = 0;
  uint64_t decode_bytes_ = 0;
  uint64_t num_parameters_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_LLAMA_MODEL_H_
