#include "sim/paged_prefill_grid.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/prefill_grid.h"
#include "sim/memory.h"

namespace servelab {

int64_t PagedPrefillMakespanTiles(std::span<const PrefillChunk> chunks, int64_t kv_heads,
                                  int32_t group, int64_t slots) {
  const int32_t per_block = kernels::PrefillTokensPerBlock(group);
  if (chunks.empty() || kv_heads < 1 || slots < 1 || per_block < 1) return 0;
  // Query tiles a sequence's chunk spans; the launch's z extent is the most of them.
  const auto query_tiles = [&](const PrefillChunk& c) {
    return (std::max<int64_t>(c.new_tokens, 0) + per_block - 1) / per_block;
  };
  // Every block at once (the common chunk of a few hundred tokens): the longest walk, its
  // last query tile's.
  int64_t blocks = 0, longest = 0, launch_tiles = 0;
  for (const PrefillChunk& c : chunks) {
    const int64_t tiles = query_tiles(c);
    if (tiles < 1) continue;
    blocks += kv_heads * tiles;
    longest = std::max(longest, kernels::PrefillBlockKvTiles(c.cached, c.new_tokens, tiles - 1, per_block));
    launch_tiles = std::max(launch_tiles, tiles);
  }
  if (blocks <= slots) return longest;
  // Slots as (time they free, in K/V tiles walked; how many free then), a min-heap: the
  // same time may sit in two entries, which takes them in turn as one. This thread's,
  // kept between calls (no allocation once grown).
  using Slots = std::pair<int64_t, int64_t>;
  thread_local std::vector<Slots> free_at;
  free_at.assign(1, Slots{0, slots});
  constexpr auto later = std::greater<Slots>();
  int64_t makespan = 0;
  for (int64_t query_tile = launch_tiles - 1; query_tile >= 0; --query_tile) {
    for (const PrefillChunk& c : chunks) {  // launch order: sequence after sequence
      const int64_t walk = kernels::PrefillBlockKvTiles(c.cached, c.new_tokens, query_tile, per_block);
      if (walk == 0) continue;  // past its chunk: the block exits at once
      // The KV heads' blocks of this (sequence, query tile), alike: onto the earliest slots.
      for (int64_t left = kv_heads; left > 0;) {
        std::pop_heap(free_at.begin(), free_at.end(), later);
        auto [at, count] = free_at.back();
        free_at.pop_back();
        const int64_t taken = std::min(count, left);
        if (count > taken) {
          free_at.emplace_back(at, count - taken);
          std::push_heap(free_at.begin(), free_at.end(), later);
        }
        free_at.emplace_back(at + walk, taken);
        std::push_heap(free_at.begin(), free_at.end(), later);
        makespan = std::max(makespan, at + walk);
        left -= taken;
      }
    }
  }
  return makespan;
}

double PagedPrefillGridTokens(std::span<const PrefillChunk> chunks, const OpShape& shape,
                              int32_t sms, int32_t resident_ctas) {
  const int64_t kv_heads = std::max<int32_t>(1, KvHeadsPerGpu(shape.model, shape.tensor_parallel));
  const int64_t heads = std::max<int64_t>(1, shape.model.num_attention_heads / std::max(1, shape.tensor_parallel));
  const auto group = static_cast<int32_t>(std::clamp<int64_t>(heads / kv_heads, 1, INT32_MAX));
  const int64_t slots = sms < 1 || resident_ctas < 1 ? 0 : int64_t{sms} * resident_ctas;
  const int64_t tiles = PagedPrefillMakespanTiles(chunks, kv_heads, group, slots);
  if (tiles > 0) return static_cast<double>(tiles) * kernels::kPrefillKvTile;
  int64_t longest = 0;
  for (const PrefillChunk& c : chunks) longest = std::max(longest, c.cached + c.new_tokens);
  return static_cast<double>(longest);
}

std::vector<PrefillChunk>& PrefillChunkScratch() {
  thread_local std::vector<PrefillChunk> chunks;
  return chunks;
}

}  // namespace servelab
