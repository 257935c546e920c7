#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {
namespace {

// The shapes one call works with, checked once.
struct AttentionDims {
  int32_t num_heads = 0;
  int32_t group = 0;  // query heads per kv head
  int32_t max_blocks_per_seq = 0;
  float scale = 0.0f;
  KvCacheShape cache;
};

// Per-call scratch, sized once: scores for one KV block of every query head, and the
// running softmax state (max, sum) per head.
struct Scratch {
  std::vector<float> scores;   // [num_heads, block_size]
  std::vector<float> run_max;  // [num_heads]
  std::vector<float> run_sum;  // [num_heads]
};

float Dot(const float* a, const float* b, int32_t n) {
  // Four partial sums: independent chains the compiler can keep in registers.
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Attention of every query head of one query token that sees positions [0, limit) of a
// sequence. Each KV block is read once for all KV heads, slot by slot: a slot's K (and
// V) for every KV head is one contiguous row of num_kv_heads x head_dim, so the cache
// streams in order whatever the head count. (Walking the cache once per KV head reads a
// head_dim stripe of every slot, a 1 KB stride with 4 KV heads of 64, which the
// prefetchers do not follow: from DRAM that ran 2.5x slower per query head than with one
// or two KV heads.) Per head the arithmetic and its order are those of a pass of its own.
//   out:         [num_heads, head_dim], written
//   q:           [num_heads, head_dim]; query head h reads KV head h / group
//   block_table: [max_blocks_per_seq]
void AttendToken(float* out, const float* q, const float* k_cache, const float* v_cache,
                 const int32_t* block_table, int32_t limit, const AttentionDims& dims,
                 Scratch& scratch) {
  const int32_t heads = dims.num_heads;
  const int32_t group = dims.group;
  const int32_t kv_heads = dims.cache.num_kv_heads;
  const int32_t head_dim = dims.cache.head_dim;
  const int32_t block_size = dims.cache.block_size;
  const int64_t slot_stride = dims.cache.SlotStride();
  float* scores = scratch.scores.data();
  float* run_max = scratch.run_max.data();
  float* run_sum = scratch.run_sum.data();
  std::fill(out, out + int64_t{heads} * head_dim, 0.0f);  // unnormalised sum of p * v
  std::fill(run_max, run_max + heads, -std::numeric_limits<float>::infinity());
  std::fill(run_sum, run_sum + heads, 0.0f);

  const int32_t num_blocks = (limit + block_size - 1) / block_size;
  for (int32_t b = 0; b < num_blocks; ++b) {
    const int32_t block = block_table[b];
    SERVELAB_KERNEL_CHECK_MSG(block >= 0 && block < dims.cache.num_blocks,
                              "block_table[%d] = %d of %d blocks", b, block, dims.cache.num_blocks);
    const int32_t n = std::min(block_size, limit - b * block_size);  // tokens used
    const int64_t base = int64_t{block} * block_size * slot_stride;  // the block's first slot

    for (int32_t t = 0; t < n; ++t) {
      const float* k_slot = k_cache + base + t * slot_stride;  // [kv_heads, head_dim]
      for (int32_t kv_head = 0; kv_head < kv_heads; ++kv_head) {
        const float* k_row = k_slot + int64_t{kv_head} * head_dim;
        for (int32_t j = 0; j < group; ++j) {
          const int32_t h = kv_head * group + j;
          scores[h * block_size + t] = dims.scale * Dot(q + int64_t{h} * head_dim, k_row, head_dim);
        }
      }
    }
    // Fold the block into each head's running softmax: raise the max once per block,
    // rescale what was accumulated under the old max, turn scores into weights.
    for (int32_t h = 0; h < heads; ++h) {
      float* s = scores + h * block_size;
      const float block_max = *std::max_element(s, s + n);
      if (block_max > run_max[h]) {
        const float correction = std::exp(run_max[h] - block_max);  // 0 on the first block
        float* acc = out + int64_t{h} * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) acc[d] *= correction;
        run_sum[h] *= correction;
        run_max[h] = block_max;
      }
      for (int32_t t = 0; t < n; ++t) {
        s[t] = std::exp(s[t] - run_max[h]);
        run_sum[h] += s[t];
      }
    }
    for (int32_t t = 0; t < n; ++t) {
      const float* v_slot = v_cache + base + t * slot_stride;  // [kv_heads, head_dim]
      for (int32_t kv_head = 0; kv_head < kv_heads; ++kv_head) {
        const float* v_row = v_slot + int64_t{kv_head} * head_dim;
        for (int32_t j = 0; j < group; ++j) {
          const int32_t h = kv_head * group + j;
          const float p = scores[h * block_size + t];
          float* acc = out + int64_t{h} * head_dim;
          for (int32_t d = 0; d < head_dim; ++d) acc[d] += p * v_row[d];
        }
      }
    }
  }
  for (int32_t h = 0; h < heads; ++h) {
    const float inv_sum = 1.0f / run_sum[h];
    float* acc = out + int64_t{h} * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) acc[d] *= inv_sum;
  }
}

AttentionDims CheckDims(int32_t num_heads, int32_t max_blocks_per_seq, float scale,
                        const KvCacheShape& cache) {
  SERVELAB_KERNEL_CHECK(cache.Valid());
  SERVELAB_KERNEL_CHECK_MSG(num_heads > 0 && num_heads % cache.num_kv_heads == 0,
                            "num_heads %d, num_kv_heads %d", num_heads, cache.num_kv_heads);
  SERVELAB_KERNEL_CHECK(max_blocks_per_seq >= 0);
  return AttentionDims{num_heads, num_heads / cache.num_kv_heads, max_blocks_per_seq, scale, cache};
}

Scratch MakeScratch(const AttentionDims& dims) {
  return Scratch{std::vector<float>(size_t(dims.num_heads) * dims.cache.block_size),
                 std::vector<float>(dims.num_heads), std::vector<float>(dims.num_heads)};
}

void CheckContextLen(int32_t seq, int32_t context_len, int32_t query_len, int32_t max_context_len,
                     const AttentionDims& dims) {
  SERVELAB_KERNEL_CHECK_MSG(
      context_len >= query_len && context_len <= max_context_len &&
          int64_t{context_len} <= int64_t{dims.max_blocks_per_seq} * dims.cache.block_size,
      "seq %d: context_len %d, query_len %d, max_context_len %d, %d blocks of %d", seq, context_len,
      query_len, max_context_len, dims.max_blocks_per_seq, dims.cache.block_size);
}

}  // namespace

void PagedDecodeAttention(float* out, const float* q, const float* k_cache, const float* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens,
                          int32_t num_seqs, int32_t num_heads, int32_t max_blocks_per_seq,
                          int32_t max_context_len, float scale, const KvCacheShape& cache) {
  const AttentionDims dims = CheckDims(num_heads, max_blocks_per_seq, scale, cache);
  SERVELAB_KERNEL_CHECK(num_seqs >= 0);
  Scratch scratch = MakeScratch(dims);
  const int64_t token_elems = int64_t{num_heads} * cache.head_dim;
  for (int32_t s = 0; s < num_seqs; ++s) {
    CheckContextLen(s, context_lens[s], 1, max_context_len, dims);
    AttendToken(out + s * token_elems, q + s * token_elems, k_cache, v_cache,
                block_tables + int64_t{s} * max_blocks_per_seq, context_lens[s], dims, scratch);
  }
}

void PagedPrefillAttention(float* out, const float* q, const float* k_cache, const float* v_cache,
                           const int32_t* block_tables, const int32_t* query_start_loc,
                           const int32_t* context_lens, int32_t num_seqs, int32_t num_query_tokens,
                           int32_t num_heads, int32_t max_blocks_per_seq, int32_t max_query_len,
                           int32_t max_context_len, float scale, const KvCacheShape& cache) {
  const AttentionDims dims = CheckDims(num_heads, max_blocks_per_seq, scale, cache);
  SERVELAB_KERNEL_CHECK(num_seqs >= 0);
  SERVELAB_KERNEL_CHECK_MSG(
      query_start_loc[0] == 0 && query_start_loc[num_seqs] == num_query_tokens,
      "query_start_loc [%d .. %d], num_query_tokens %d", query_start_loc[0],
      query_start_loc[num_seqs], num_query_tokens);
  Scratch scratch = MakeScratch(dims);
  const int64_t token_elems = int64_t{num_heads} * cache.head_dim;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t start = query_start_loc[s];
    const int32_t query_len = query_start_loc[s + 1] - start;
    SERVELAB_KERNEL_CHECK_MSG(query_len >= 0 && query_len <= max_query_len,
                              "seq %d: query_len %d, max_query_len %d", s, query_len,
                              max_query_len);
    CheckContextLen(s, context_lens[s], query_len, max_context_len, dims);
    const int32_t first_pos = context_lens[s] - query_len;  // position of query token 0
    const int32_t* block_table = block_tables + int64_t{s} * max_blocks_per_seq;
    for (int32_t i = 0; i < query_len; ++i) {
      const int64_t token = start + i;
      AttendToken(out + token * token_elems, q + token * token_elems, k_cache, v_cache, block_table,
                  first_pos + i + 1, dims, scratch);
    }
  }
}

}  // namespace servelab::kernels::cpu
