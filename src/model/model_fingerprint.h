// ComputeModelFingerprint: the 128-bit identity of a GGUF model that KV
// state files are bound to (kv/model_fingerprint.h). It must change when a
// weight, a hyperparameter or a tokenizer entry changes, and be cheap
// enough to compute at every load of a multi-GB file.
//
// What is hashed (XXH3-128, streaming, seed 0), in this order:
//   1. a domain tag, "kvault-model-fingerprint-v1";
//   2. every metadata entry, sorted by key: the key and the value's type id
//      and GGUF encoding (so tokens, scores, merges and every hparam count);
//   3. every tensor info, sorted by name: name, ggml type, shape, byte size;
//   4. a sample of each tensor's bytes (same sorted order): the whole tensor
//      when it has at most `max_blocks_per_tensor` blocks of `block_bytes`,
//      otherwise its first block, its last block and every stride-th block
//      in between (stride chosen so at most max_blocks_per_tensor blocks are
//      read). With the defaults (4 KiB, 16 blocks) a 7B model hashes about
//      20 MB instead of 13 GB.
// Limits (deliberate): a change confined to unsampled blocks of a large
// tensor is not seen (an edit anywhere in a tensor of <= 64 KiB is); the
// GGUF version, general.alignment padding, tensor file order and data
// offsets, and metadata order are layout, not model, and do not count
// (general.alignment itself is metadata and does).
#ifndef KVAULT_MODEL_MODEL_FINGERPRINT_H_
#define KVAULT_MODEL_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "kv/model_fingerprint.h"
#include "model/gguf_file.h"

namespace kvault {

struct FingerprintOptions {
  uint64_t block_bytes = 4096;
  uint64_t max_blocks_per_tensor = 16;  // >= 2
};

// Returns the fingerprint of `file` (never fails: the file was validated
// when it was parsed).
ModelFingerprint ComputeModelFingerprint(
    const GgufFile& file, const FingerprintOptions& options = {});

// Returns the [begin, end) byte ranges of a tensor of `size_bytes` bytes
// that the fingerprint hashes, ascending and disjoint.
std::vector<std::pair<uint64_t, uint64_t>> FingerprintSampleRanges(
    uint64_t size_bytes, const FingerprintOptions& options = {});

}  // namespace kvault

#endif  // KVAULT_MODEL_MODEL_FINGERPRINT_H_
