// Writes the seed corpus of state_file_fuzz: valid state files (F32, F16 and
// Q8_0; 0, 1 and several chunks; a few layouts) produced by the real writer,
// WriteSequenceState, so the fuzzer starts from files that pass every check.
// Usage: make_state_corpus OUT_DIR   (OUT_DIR is created if missing)
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/memory_file.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

struct Seed {
  const char* name;
  KvLayout layout;
  uint64_t num_tokens;
  uint64_t target_chunk_bytes;  // small values give several chunks
};

KvLayout Layout(uint32_t layers, uint32_t heads, uint32_t dim_k, uint32_t dim_v,
                KvDtype dtype) {
  KvLayout layout;
  layout.num_layers = layers;
  layout.num_kv_heads = heads;
  layout.head_dim_k = dim_k;
  layout.head_dim_v = dim_v;
  layout.dtype = dtype;
  return layout;
}

// Seeds stay far below the fuzzer's -max_len (a few hundred KB) and cover
// both token-count parities, which the fuzzer maps to different pool setups.
std::vector<Seed> Seeds() {
  KvLayout f16 = Layout(2, 2, 32, 32, KvDtype::kF16);       // 512 B per cell
  KvLayout f32 = Layout(1, 1, 16, 8, KvDtype::kF32);        // 96 B per cell
  KvLayout q8 = Layout(3, 2, 32, 32, KvDtype::kQ8_0);       // 408 B per cell
  KvLayout q8_wide = Layout(1, 1, 64, 32, KvDtype::kQ8_0);  // 102 B per cell
  return {
      {"f16_empty", f16, 0, 1 << 20},
      {"f16_one_token", f16, 1, 1 << 20},
      {"f16_one_chunk", f16, 21, 1 << 20},
      {"f16_chunks", f16, 37, 4096},  // 8 tokens per chunk, 5 chunks
      {"f32_one_token", f32, 1, 1 << 20},
      {"f32_chunks", f32, 50, 1000},        // 10 tokens per chunk
      {"f32_uneven_chunks", f32, 19, 300},  // 3 per chunk, last has 1
      {"q8_0_one_chunk", q8, 16, 1 << 20},
      {"q8_0_chunks", q8, 35, 2048},  // 5 tokens per chunk
      {"q8_0_wide_chunks", q8_wide, 33, 500},
  };
}

// Builds a cache holding one sequence of `seed.num_tokens` random cells and
// returns its state file bytes.
StatusOr<std::string> MakeStateFile(const Seed& seed, std::mt19937_64* rng) {
  KvCacheOptions options;
  options.num_pages = static_cast<uint32_t>(seed.num_tokens / 16 + 1);
  options.page_size = 16;
  options.layout = seed.layout;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(options));
  const SeqId seq{7};
  std::vector<TokenPos> tokens(seed.num_tokens);
  for (uint64_t i = 0; i < tokens.size(); ++i) {
    tokens[i] =
        TokenPos{static_cast<TokenId>((*rng)() % 32000), static_cast<Pos>(i)};
  }
  KV_ASSIGN_OR_RETURN(std::vector<CellId> cells, cache->Append(seq, tokens));
  KvStorage* storage = cache->storage();
  for (CellId cell : cells) {
    for (uint32_t l = 0; l < seed.layout.num_layers; ++l) {
      for (std::span<std::byte> row : {storage->Rows(KvSide::kK, l, cell),
                                       storage->Rows(KvSide::kV, l, cell)}) {
        for (std::byte& b : row) b = static_cast<std::byte>((*rng)());
      }
    }
  }
  SaveOptions save;
  save.target_chunk_bytes = seed.target_chunk_bytes;
  save.producer = "make_state_corpus";
  std::string bytes;
  StringWritableFile out(&bytes);
  ModelFingerprint fingerprint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  KV_RETURN_IF_ERROR(
      WriteSequenceState(*cache, seq, fingerprint, save, &out).status());
  return bytes;
}

int Run(const std::string& dir) {
  Env* env = Env::Default();
  if (Status s = env->CreateDir(dir); !s.ok()) {
    std::fprintf(stderr, "make_state_corpus: %s\n", s.ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(20261203);
  for (const Seed& seed : Seeds()) {
    StatusOr<std::string> bytes = MakeStateFile(seed, &rng);
    Status s = bytes.ok()
                   ? WriteStringToFile(env, *bytes, JoinPath(dir, seed.name),
                                       /*sync=*/false)
                   : bytes.status();
    if (!s.ok()) {
      std::fprintf(stderr, "make_state_corpus: %s: %s\n", seed.name,
                   s.ToString().c_str());
      return 1;
    }
  }
  std::printf("make_state_corpus: wrote %zu seeds to %s\n", Seeds().size(),
              dir.c_str());
  return 0;
}

}  // namespace
}  // namespace kvault

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_state_corpus OUT_DIR\n");
    return 2;
  }
  return kvault::Run(argv[1]);
}
