#pragma once
// Attention of new query tokens over a paged KV cache, decode and chunked prefill.
//
// Conventions shared by both entry points:
// - The cache already holds this step's K/V (WriteKvCache ran first), so
//   context_lens[s] counts the cached tokens of sequence s INCLUDING this step's.
// - block_tables[s, j] is the block holding positions [j * block_size, (j + 1) * block_size)
//   of sequence s; only the first ceil(context_lens[s] / block_size) entries are read,
//   the rest may be anything (padding).
// - GQA: num_heads is a multiple of num_kv_heads; query head h reads kv head
//   h / (num_heads / num_kv_heads).
// - Softmax is numerically stable (running max, rescaled once per KV block); scores,
//   sums and outputs accumulate in f32 (CPU and CUDA alike).
// - max_context_len (>= every context_lens[s]) and max_query_len size the CUDA launch,
//   which cannot read device-side lengths; the CPU twin CHECKs them.
#include <cstdint>

#include "kernels/kv_cache_shape.h"

namespace servelab::kernels::cpu {

// One query token per sequence (its last position, context_lens[s] - 1).
//   out:          [num_seqs, num_heads, head_dim], f32, written
//   q:            [num_seqs, num_heads, head_dim], f32 (RoPE already applied)
//   k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim], f32
//   block_tables: [num_seqs, max_blocks_per_seq], int32 block ids
//   context_lens: [num_seqs], int32, each in [1, max_context_len]
//   scale:        multiplies q.k (1 / sqrt(head_dim) for Llama)
void PagedDecodeAttention(float* out, const float* q, const float* k_cache, const float* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens,
                          int32_t num_seqs, int32_t num_heads, int32_t max_blocks_per_seq,
                          int32_t max_context_len, float scale, const KvCacheShape& cache);

// query_len[s] = query_start_loc[s + 1] - query_start_loc[s] new tokens per sequence,
// packed; they are the LAST query_len[s] positions of its context. Query token i of s sits
// at position p = context_lens[s] - query_len[s] + i and attends to positions 0..p
// (causal inside the chunk, everything before it). query_len 1 is a decode.
//   out:             [num_query_tokens, num_heads, head_dim], f32, written
//   q:               [num_query_tokens, num_heads, head_dim], f32
//   query_start_loc: [num_seqs + 1], int32, 0 = start[0] <= ... <= start[num_seqs]
//                    = num_query_tokens
//   context_lens:    [num_seqs], int32, query_len[s] <= context_lens[s] <= max_context_len
//   max_query_len:   >= every query_len[s]
// Other arguments as PagedDecodeAttention. A sequence with query_len 0 is skipped.
void PagedPrefillAttention(float* out, const float* q, const float* k_cache, const float* v_cache,
                           const int32_t* block_tables, const int32_t* query_start_loc,
                           const int32_t* context_lens, int32_t num_seqs, int32_t num_query_tokens,
                           int32_t num_heads, int32_t max_blocks_per_seq, int32_t max_query_len,
                           int32_t max_context_len, float scale, const KvCacheShape& cache);

}  // namespace servelab::kernels::cpu
