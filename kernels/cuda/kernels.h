#pragma once
// CUDA twins of the CPU kernels in ../cpu/ (declared in ../*.h): same names, argument order,
// layouts and meaning; bf16 storage, f32 accumulation, and a trailing cudaStream_t. Every
// pointer is device memory except the KvCacheShape (host, by reference) and the scalars.
// Launches are asynchronous on `stream`; host-visible preconditions (sizes, ratios) are
// SERVELAB_KERNEL_CHECKed, device-side ones (ids and slots in range) trap the kernel, which
// the next synchronizing call reports. A launch error (bad configuration) aborts: a bug.
// Zero tokens / zero sequences launch nothing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kv_cache_shape.h"

namespace servelab::kernels::cuda {

using bf16 = __nv_bfloat16;

// k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]; k, v: [num_tokens,
// num_kv_heads, head_dim]; slot_mapping: [num_tokens], int64, negative = padding (skipped).
void WriteKvCache(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v,
                  const int64_t* slot_mapping, int32_t num_tokens, const KvCacheShape& cache,
                  cudaStream_t stream);

// out, x: [num_tokens, hidden] (out may be x); weight: [hidden].
void RmsNorm(bf16* out, const bf16* x, const bf16* weight, int32_t num_tokens, int32_t hidden,
             float eps, cudaStream_t stream);

// residual += x (rounded to bf16 once, stored); x = RmsNorm(residual) of the stored values.
void FusedAddRmsNorm(bf16* x, bf16* residual, const bf16* weight, int32_t num_tokens,
                     int32_t hidden, float eps, cudaStream_t stream);

// q: [num_tokens, num_heads, head_dim], k: [num_tokens, num_kv_heads, head_dim], in place;
// positions: [num_tokens], int32; inv_freq: [head_dim / 2], f32 (from RopeInvFreq, copied to
// the device once per model). Angles and their cos/sin are evaluated in f64 like the twin.
void ApplyRope(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq,
               int32_t num_tokens, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
               cudaStream_t stream);

// out: [num_tokens, d]; input: [num_tokens, 2 * d], gate then up.
void SiluAndMul(bf16* out, const bf16* input, int32_t num_tokens, int32_t d, cudaStream_t stream);

// out: [num_tokens, hidden]; table: [vocab_size, hidden]; token_ids: [num_tokens], int32.
void EmbeddingGather(bf16* out, const bf16* table, const int32_t* token_ids, int32_t num_tokens,
                     int32_t vocab_size, int32_t hidden, cudaStream_t stream);

// Split-KV scratch for PagedDecodeAttention (kernels allocate no device memory): f32 bytes
// for every (sequence, head, partition): enough for any launch of up to num_seqs sequences
// and max_context_len tokens with the automatic partition length, or with `partition_len`
// (128, 256 or 512) when given. 0 when no split is needed. Reads the current device's SM
// count.
size_t PagedDecodeAttentionWorkspaceBytes(int32_t num_seqs, int32_t num_heads,
                                          int32_t max_context_len, const KvCacheShape& cache,
                                          int32_t partition_len = 0);

// As cpu::PagedDecodeAttention. The one addition to the twin's arguments is the split-KV
// scratch, before the stream: `workspace` (device, f32, >= the bytes above) lets contexts
// longer than one partition be split across thread blocks (flash-decoding) and merged by a
// second pass; nullptr (or too small) runs one block per (sequence, kv head), unsplit.
// Partitions are 512 tokens when the launch has enough (sequence, kv head, partition)
// blocks for two per SM, else 256 or 128 (a small batch still spreads over the device);
// `partition_len` (128, 256, 512) forces one, for tests and benchmarks.
// Supported: head_dim 64, 128 or 256; num_heads / num_kv_heads <= 8.
void PagedDecodeAttention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens,
                          int32_t num_seqs, int32_t num_heads, int32_t max_blocks_per_seq,
                          int32_t max_context_len, float scale, const KvCacheShape& cache,
                          float* workspace, size_t workspace_bytes, cudaStream_t stream,
                          int32_t partition_len = 0);

// As cpu::PagedPrefillAttention. Supported: head_dim 64, 128 or 256;
// num_heads / num_kv_heads <= 64. head_dim 64 and 128 run on tensor cores (FlashAttention-2
// style tiles, bf16 MMA with f32 accumulation; the softmax weights P are rounded to bf16
// before P V, as FlashAttention does), 256 on CUDA cores (f32 throughout).
void PagedPrefillAttention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache,
                           const int32_t* block_tables, const int32_t* query_start_loc,
                           const int32_t* context_lens, int32_t num_seqs, int32_t num_query_tokens,
                           int32_t num_heads, int32_t max_blocks_per_seq, int32_t max_query_len,
                           int32_t max_context_len, float scale, const KvCacheShape& cache,
                           cudaStream_t stream);

// Greedy sampling: token_ids[t] = argmax over logits[t, :], the lowest index on ties
// (NaN never wins unless the whole row is NaN, then 0).
//   token_ids: [num_tokens], int32, written; logits: [num_tokens, vocab_size]
void GreedySample(int32_t* token_ids, const bf16* logits, int32_t num_tokens, int32_t vocab_size,
                  cudaStream_t stream);
void GreedySample(int32_t* token_ids, const float* logits, int32_t num_tokens, int32_t vocab_size,
                  cudaStream_t stream);

// Top-p (nucleus) sampling with temperature and top-k, one draw per row: the rule of
// ../top_p_sample.h (fixed-point weights, ties kept whole, inverse CDF in id order), and the
// same token as cpu::TopPSample for the same inputs (bf16 logits: the twin given their f32
// values). Rows with invalid parameters (the twin's CHECKs) trap.
//   token_ids: [num_rows], int32, written; logits: [num_rows, vocab_size];
//   temperatures, top_ps: [num_rows], f32; top_ks: [num_rows], int32; uniforms: [num_rows], f64
void TopPSample(int32_t* token_ids, const bf16* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size, cudaStream_t stream);
void TopPSample(int32_t* token_ids, const float* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size, cudaStream_t stream);

}  // namespace servelab::kernels::cuda
