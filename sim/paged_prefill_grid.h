#pragma once
// Prefill attention as servelab's own CUDA kernels launch it, the work of the calibrated
// form's grid term (OpWork::cta_tokens; op_model.h).
//
// Each kernel runs one thread block a (KV head, sequence, query tile), and a block walks
// every K/V position up to its last query token's, a tile at a time (kernels/prefill_grid.h:
// which kernel a shape takes, its tile, its order). Measured on an H200 (Llama-3-8B, 8 KV
// heads, the tensor-core kernel), the time is not the longest block's walk: a chunk of
// 2,048 after none takes 1.9 times a chunk of 1,536, where the longest walk grows by a
// third, because the launch's blocks (768, then 1,024) outnumber the SMs' slots (132 x 3:
// what the kernel's 62 KiB of shared memory allow) and the first to finish take the rest.
// Counted here as the device's block scheduler runs them: blocks in launch order (KV head
// fastest, then sequence, then query tile in the kernel's order), each to whichever of the
// SMs x resident_ctas slots frees first; cta_tokens is the last to finish, in K/V tiles x
// the kernel's tile. resident_ctas 0 (a model fitted before the count, or on other
// kernels): no slots to wait for, the longest sequence's walk (its cached and new tokens).
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/prefill_grid.h"
#include "sim/op_model.h"

namespace servelab {

// One sequence of a prefill launch: its chunk's new tokens after `cached` in the cache.
struct PrefillChunk {
  int64_t new_tokens = 0;
  int64_t cached = 0;
};

// The K/V tiles the busiest of `slots` block slots walks: the blocks of a launch by `rule`
// for `chunks` (`kv_heads` KV heads, a GQA group of `group` query heads a KV head) placed
// in launch order, each on the slot that frees first. 0 without chunks, slots or a group
// the kernels take (kernels::PrefillTokensPerBlock > 0).
int64_t PagedPrefillMakespanTiles(std::span<const PrefillChunk> chunks, int64_t kv_heads, int32_t group,
                                  int64_t slots, kernels::PrefillGridRule rule = {});

// The tokens a prefill launch of `chunks` on `shape` walks on its busiest SM, `sms` SMs
// running `resident_ctas` blocks each at once, with the kernel `shape` takes: the makespan
// above in tokens, or (no slots, or a group no kernel takes) the longest chunk's cached and
// new tokens.
double PagedPrefillGridTokens(std::span<const PrefillChunk> chunks, const OpShape& shape,
                              int32_t sms, int32_t resident_ctas);

// This thread's list of chunks for AddPagedPrefillGridWork, kept between calls: a step
// allocates nothing once it has grown.
std::vector<PrefillChunk>& PrefillChunkScratch();

// Adds the grid term of a prefill launch of `seqs` sequences, sequence i `chunk(i)` (a
// PrefillChunk). REQUIRES: `chunk` neither reads nor writes PrefillChunkScratch() (it is
// being filled) and calls nothing that prices a prefill launch.
template <class ChunkOf>
void AddPagedPrefillGridWork(OpWork& work, const OpShape& shape, int32_t sms, int32_t resident_ctas,
                             int64_t seqs, ChunkOf chunk) {
  if (seqs < 1) return;
  std::vector<PrefillChunk>& chunks = PrefillChunkScratch();
  chunks.clear();
  for (int64_t i = 0; i < seqs; ++i) chunks.push_back(chunk(i));
  work.cta_tokens += PagedPrefillGridTokens(chunks, shape, sms, resident_ctas);
}

}  // namespace servelab
