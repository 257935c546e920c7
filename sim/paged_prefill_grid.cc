#include "sim/paged_prefill_grid.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "sim/block_slots.h"
#include "sim/memory.h"

namespace servelab {

int64_t PagedPrefillMakespanTiles(std::span<const PrefillChunk> chunks, int64_t kv_heads, int32_t group,
                                  int64_t slots, kernels::PrefillGridRule rule) {
  const int32_t per_block = kernels::PrefillTokensPerBlock(group);
  if (chunks.empty() || kv_heads < 1 || slots < 1 || per_block < 1 || rule.kv_tile < 1) return 0;
  // Query tiles a sequence's chunk spans; the launch's z extent is the most of them.
  const auto query_tiles = [&](const PrefillChunk& c) {
    return kernels::PrefillQueryTiles(c.new_tokens, per_block);
  };
  const auto walk_of = [&](const PrefillChunk& c, int64_t query_tile) {
    return kernels::PrefillBlockKvTiles(c.cached, c.new_tokens, query_tile, per_block, rule.kv_tile);
  };
  // Every block at once (the common chunk of a few hundred tokens): the longest walk, a
  // sequence's last query tile's.
  int64_t blocks = 0, longest = 0, launch_tiles = 0;
  for (const PrefillChunk& c : chunks) {
    const int64_t tiles = query_tiles(c);
    if (tiles < 1) continue;
    blocks += kv_heads * tiles;
    longest = std::max(longest, walk_of(c, tiles - 1));
    launch_tiles = std::max(launch_tiles, tiles);
  }
  if (blocks <= slots) return longest;

  // This thread's scratch, kept between calls (no allocation once grown): the sequences
  // by their query tiles, most first, and those with a block at the query tile at hand, in
  // launch (sequence) order.
  thread_local std::vector<size_t> by_tiles, active;
  by_tiles.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (query_tiles(chunks[i]) > 0) by_tiles.push_back(i);
  }
  std::stable_sort(by_tiles.begin(), by_tiles.end(),
                   [&](size_t a, size_t b) { return query_tiles(chunks[a]) > query_tiles(chunks[b]); });
  active.clear();
  size_t joined = 0;  // by_tiles[0, joined) active (latest first)
  if (!rule.latest_first) {
    active.assign(by_tiles.begin(), by_tiles.end());
    std::sort(active.begin(), active.end());
    joined = by_tiles.size();
  }
  BlockSlots slots_of(slots, longest);
  for (int64_t z = 0; z < launch_tiles; ++z) {
    const int64_t query_tile = rule.latest_first ? launch_tiles - 1 - z : z;
    if (rule.latest_first) {  // sequences join as the tiles reach their chunk's last
      for (; joined < by_tiles.size() && query_tiles(chunks[by_tiles[joined]]) > query_tile; ++joined) {
        active.insert(std::upper_bound(active.begin(), active.end(), by_tiles[joined]), by_tiles[joined]);
      }
    } else {  // and leave past it, earliest first
      for (; joined > 0 && query_tiles(chunks[by_tiles[joined - 1]]) <= query_tile; --joined) {
        active.erase(std::lower_bound(active.begin(), active.end(), by_tiles[joined - 1]));
      }
    }
    // Each sequence's KV heads' blocks of this query tile, alike.
    for (const size_t i : active) slots_of.Place(walk_of(chunks[i], query_tile), kv_heads);
  }
  return slots_of.Makespan();
}

double PagedPrefillGridTokens(std::span<const PrefillChunk> chunks, const OpShape& shape,
                              int32_t sms, int32_t resident_ctas) {
  const int64_t kv_heads = std::max<int32_t>(1, KvHeadsPerGpu(shape.model, shape.tensor_parallel));
  const int64_t heads =
      std::max<int64_t>(1, shape.model.num_attention_heads / std::max(1, shape.tensor_parallel));
  const auto group = static_cast<int32_t>(
      std::clamp<int64_t>(heads / kv_heads, 1, std::numeric_limits<int32_t>::max()));
  const kernels::PrefillGridRule rule = kernels::PrefillGridOf(shape.model.HeadDim(), group);
  const int64_t slots = sms < 1 || resident_ctas < 1 ? 0 : int64_t{sms} * resident_ctas;
  const int64_t tiles = PagedPrefillMakespanTiles(chunks, kv_heads, group, slots, rule);
  if (tiles > 0) return static_cast<double>(tiles) * rule.kv_tile;
  int64_t longest = 0;
  for (const PrefillChunk& c : chunks) longest = std::max(longest, c.cached + c.new_tokens);
  return static_cast<double>(longest);
}

std::vector<PrefillChunk>& PrefillChunkScratch() {
  thread_local std::vector<PrefillChunk> chunks;
  return chunks;
}

}  // namespace servelab
