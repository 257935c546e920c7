#pragma once
// Scatters this step's new K/V rows into the paged caches (vLLM's reshape_and_cache).
#include <cstdint>

#include "kernels/kv_cache_shape.h"

namespace servelab::kernels::cpu {

// For every token t with slot_mapping[t] >= 0, copies k[t] and v[t] into slot
// slot_mapping[t] (= block_id * block_size + offset) of k_cache and v_cache.
// A negative slot means "padding, skip" and leaves the caches untouched.
//   k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim], f32, written
//   k, v:             [num_tokens, num_kv_heads, head_dim], f32
//   slot_mapping:     [num_tokens], int64
// REQUIRES: every non-negative slot < cache.NumSlots() (CHECKed); slots distinct.
void WriteKvCache(float* k_cache, float* v_cache, const float* k, const float* v,
                  const int64_t* slot_mapping, int32_t num_tokens, const KvCacheShape& cache);

}  // namespace servelab::kernels::cpu
