#pragma once
// How the tensor-core prefill attention kernel (kernels/cuda/paged_prefill_attention_tc.cu)
// lays out its launch, in plain C++: the kernel launches by these constants, and the
// calibrated cost model (sim/paged_prefill_grid.h) counts the same grid, so the two cannot
// drift apart.
//
// Grid (KV heads, sequences, query tiles): a block takes kPrefillRowsPerBlock query rows
// (query token x head of one GQA group), so group / kPrefillRowsPerBlock of a chunk's
// tokens, and walks the K/V positions from 0 to its last token's, kPrefillKvTile at a time.
// Query tiles run latest first (blockIdx.z reversed): the blocks that walk the most start
// first. A sequence's chunk ends before the launch's longest: its blocks past its end exit
// at once.
#include <cstdint>

namespace servelab::kernels {

// Query rows (query token x head of one GQA group) a block takes, both prefill kernels.
inline constexpr int32_t kPrefillRowsPerBlock = 64;
// K/V positions the tensor-core kernel walks a tile.
inline constexpr int32_t kPrefillKvTile = 64;

// Query tokens one block takes for a GQA group of `group` heads a KV head (0 when the
// group is wider than a block: no prefill kernel takes it).
inline constexpr int32_t PrefillTokensPerBlock(int32_t group) {
  return group >= 1 && group <= kPrefillRowsPerBlock ? kPrefillRowsPerBlock / group : 0;
}

// The K/V tiles the block of query tile `query_tile` walks, in a sequence whose chunk has
// `query_len` new tokens after `cached` tokens already in the cache: its last token sits at
// position cached + min(query_len, (query_tile + 1) x tokens_per_block) - 1. 0 when the
// tile starts past the chunk (the block exits).
inline constexpr int64_t PrefillBlockKvTiles(int64_t cached, int64_t query_len, int64_t query_tile,
                                             int32_t tokens_per_block) {
  const int64_t first = query_tile * tokens_per_block;
  if (tokens_per_block < 1 || first >= query_len) return 0;
  const int64_t end = first + tokens_per_block < query_len ? first + tokens_per_block : query_len;
  return (cached + end - 1) / kPrefillKvTile + 1;
}

}  // namespace servelab::kernels
