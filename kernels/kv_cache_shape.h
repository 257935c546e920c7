#pragma once
// Geometry of one layer's paged KV cache, shared by WriteKvCache and paged attention.
//
// Layout (fixed; the CUDA kernels use the same one): the K cache and the V cache are each
// one contiguous array
//   [num_blocks, block_size, num_kv_heads, head_dim]   (f32 on CPU, bf16 on CUDA)
// so token slot s = block_id * block_size + offset_in_block starts at element
// s * num_kv_heads * head_dim, and one (slot, kv_head) row of head_dim is contiguous.
#include <cstdint>

namespace servelab::kernels {

struct KvCacheShape {
  int32_t num_blocks = 0;
  int32_t block_size = 0;  // tokens per block (16 in vLLM's default)
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;

  int64_t NumSlots() const { return int64_t{num_blocks} * block_size; }
  // Elements from one token slot to the next.
  int64_t SlotStride() const { return int64_t{num_kv_heads} * head_dim; }
  // Elements in the K cache (and, separately, in the V cache).
  int64_t NumElements() const { return NumSlots() * SlotStride(); }
  bool Valid() const {
    return num_blocks >= 0 && block_size > 0 && num_kv_heads > 0 && head_dim > 0;
  }
};

}  // namespace servelab::kernels
