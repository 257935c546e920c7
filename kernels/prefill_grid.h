#pragma once
// How the CUDA prefill attention kernels lay out their launch, in plain C++: which kernel a
// shape takes (the dispatch in kernels/cuda/paged_prefill_attention.cu calls
// PrefillUsesTensorCores), their shared constants (static_assert-ed in each kernel), and
// the grid's arithmetic: the kernels' launches and blocks compute their grid with these
// functions, and the calibrated cost model (sim/paged_prefill_grid.h) counts it with them.
//
// Grid (KV heads, sequences, query tiles), both kernels: a block takes kPrefillRowsPerBlock
// query rows (query token x head of one GQA group), so kPrefillRowsPerBlock / group of a
// chunk's tokens, and walks the K/V positions from 0 to its last token's, a tile at a time.
// The tensor-core kernel (paged_prefill_attention_tc.cu, head_dim 64 and 128) walks 64
// positions a tile and runs its query tiles latest first (blockIdx.z reversed: the blocks
// that walk the most start first); the CUDA-core kernel (paged_prefill_attention.cu, the
// others) 32 a tile, earliest first. A sequence's chunk ends before the launch's longest:
// its blocks past its end exit at once.
#include <cstdint>

#include "kernels/host_device.h"

namespace servelab::kernels {

// Query rows (query token x head of one GQA group) a block takes, both prefill kernels.
inline constexpr int32_t kPrefillRowsPerBlock = 64;
// K/V positions a block walks a tile: the tensor-core kernel's, the CUDA-core kernel's.
inline constexpr int32_t kPrefillKvTile = 64;
inline constexpr int32_t kPrefillCudaCoreKvTile = 32;

// Whether the tensor-core kernel takes a head_dim and GQA group (else the CUDA-core one).
inline constexpr bool PrefillUsesTensorCores(int32_t head_dim, int32_t group) {
  return (head_dim == 64 || head_dim == 128) && group <= kPrefillRowsPerBlock;
}

// The launch's grid as the cost model counts it.
struct PrefillGridRule {
  int32_t kv_tile = kPrefillKvTile;  // K/V positions a block walks a tile
  bool latest_first = true;          // query tiles launched latest first
};
inline constexpr PrefillGridRule PrefillGridOf(int32_t head_dim, int32_t group) {
  return PrefillUsesTensorCores(head_dim, group) ? PrefillGridRule{kPrefillKvTile, true}
                                                 : PrefillGridRule{kPrefillCudaCoreKvTile, false};
}

// Query tokens one block takes for a GQA group of `group` heads a KV head (0 when the
// group is wider than a block: no prefill kernel takes it).
SERVELAB_HOST_DEVICE inline constexpr int32_t PrefillTokensPerBlock(int32_t group) {
  return group >= 1 && group <= kPrefillRowsPerBlock ? kPrefillRowsPerBlock / group : 0;
}

// Query tiles (the grid's z extent) a chunk of `query_len` tokens spans, `tokens_per_block`
// tokens a tile; 0 for an empty chunk or no tokens a block.
SERVELAB_HOST_DEVICE inline constexpr int64_t PrefillQueryTiles(int64_t query_len, int32_t tokens_per_block) {
  return query_len > 0 && tokens_per_block > 0 ? (query_len + tokens_per_block - 1) / tokens_per_block : 0;
}

// The K/V tiles of `kv_tile` positions the block of query tile `query_tile` walks, in a
// sequence whose chunk has `query_len` new tokens after `cached` tokens already in the
// cache: its last token sits at position cached + min(query_len, (query_tile + 1) x
// tokens_per_block) - 1. 0 when the tile starts past the chunk (the block exits).
SERVELAB_HOST_DEVICE inline constexpr int64_t PrefillBlockKvTiles(int64_t cached, int64_t query_len, int64_t query_tile,
                                             int32_t tokens_per_block, int32_t kv_tile = kPrefillKvTile) {
  const int64_t first = query_tile * tokens_per_block;
  if (tokens_per_block < 1 || kv_tile < 1 || first >= query_len) return 0;
  const int64_t end = first + tokens_per_block < query_len ? first + tokens_per_block : query_len;
  return (cached + end - 1) / kv_tile + 1;
}

}  // namespace servelab::kernels
