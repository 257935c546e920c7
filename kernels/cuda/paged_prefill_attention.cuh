#pragma once
// Internal to kernels/cuda/ (and its benchmark): the two implementations behind
// PagedPrefillAttention (kernels.h) and the one function that chooses between them.
// Host declarations only, so plain C++ (the benchmark) may include it.
//
//   tensor cores  paged_prefill_attention_tc.cu  FlashAttention-2 style, bf16 MMA with f32
//                                                accumulation; head_dim 64 and 128
//   CUDA cores    paged_prefill_attention.cu     tiled f32 FMA; head_dim 64, 128 and 256
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/kv_cache_shape.h"
#include "kernels/prefill_grid.h"

namespace servelab::kernels::cuda::detail {

enum class PrefillAttentionPath { kTensorCores, kCudaCores };

// THE dispatch: tensor cores for head_dim 64 and 128 (any group up to 64), CUDA cores for
// everything else the entry accepts (head_dim 256), or for everything when the environment
// sets SERVELAB_PREFILL_ATTENTION=cuda_cores (a diagnostic switch, read once).
PrefillAttentionPath ChoosePrefillAttentionPath(int32_t head_dim, int32_t group);

// PagedPrefillAttention with the path forced (same arguments, checks and contract); the
// public entry passes ChoosePrefillAttentionPath's choice. The benchmark times both paths.
// kTensorCores with a head_dim it does not support fails a CHECK.
void PagedPrefillAttentionOnPath(PrefillAttentionPath path, bf16* out, const bf16* q,
                                 const bf16* k_cache, const bf16* v_cache,
                                 const int32_t* block_tables, const int32_t* query_start_loc,
                                 const int32_t* context_lens, int32_t num_seqs,
                                 int32_t num_query_tokens, int32_t num_heads,
                                 int32_t max_blocks_per_seq, int32_t max_query_len,
                                 int32_t max_context_len, float scale, const KvCacheShape& cache,
                                 cudaStream_t stream);

// What both kernels read; filled by PagedPrefillAttentionOnPath after its checks.
struct PrefillParams {
  bf16* out;
  const bf16* q;
  const bf16* k_cache;
  const bf16* v_cache;
  const int32_t* block_tables;
  const int32_t* query_start_loc;
  const int32_t* context_lens;
  int32_t num_heads;
  int32_t group;             // query heads per kv head
  int32_t tokens_per_block;  // set by each launcher: its rows per block / group
  int32_t max_blocks_per_seq;
  int32_t max_query_len;
  int32_t max_context_len;
  float scale;
  int32_t num_blocks;
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t head_dim;
};

// Launchers (p checked; num_seqs > 0, max_query_len > 0).
void LaunchPrefillTensorCores(PrefillParams p, int32_t num_seqs, cudaStream_t stream);
void LaunchPrefillCudaCores(PrefillParams p, int32_t num_seqs, cudaStream_t stream);

// Query rows per thread block, both kernels: kernels/prefill_grid.h's
// kPrefillRowsPerBlock (the cost model counts the grid by it).

}  // namespace servelab::kernels::cuda::detail
