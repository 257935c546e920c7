#pragma once
// Paged KV cache accounting, behind an API that speaks tokens, not blocks (vLLM's
// allocate_slots): the scheduler asks for room for N more tokens of a request and gets
// yes or no; block tables, reference counts, the watermark and the swap space stay in
// here.
//
//   running request   AllocateSlots(r, n): room for n more tokens, or false with nothing
//                     changed (the scheduler then preempts or stalls); may use the
//                     watermark.
//   waiting request   CanAdmit(r, n) / Admit(r, n, whole, swap_in): admission keeps the
//                     watermark free and asks for room for the request's whole remaining
//                     prefill (`whole`) while allocating this step's chunk (`n`); a
//                     swapped-out request's blocks come back first (host -> device
//                     copies appended to swap_in).
//   preemption        SwapOut(r, copies) (false when the host pool has no room: the
//                     caller recomputes instead) or Free(r).
//
// Request::block_table holds the DEVICE block ids of a request's KV, in token order; it
// is written here only, and is empty while the request is swapped out. The host ids of a
// swapped-out request live here, per request slot (Request::slot, which the scheduler
// gives each request it accepts).
//
// Prefix caching (scheduler.prefix_cache; core/prefix_cache.h): CachedPrefixTokens(r)
// is the longest run of a waiting request's leading blocks already cached (block
// granularity, capped so that its last token is computed and a token can be sampled);
// Admit shares those blocks and starts the request's computed tokens after them.
// CacheComputedBlocks registers a request's blocks as they fill. Blocks whose last
// holder lets go stay cached and evictable; NumFreeBlocks() counts them, and taking a
// block evicts one only when no never-cached block is free. Swapping out copies every
// block of the request (shared ones too) and drops its references; swapped-in blocks
// come back private.
//
// Invariants (CHECKed): a device block's reference count equals the number of block
// tables holding it; NumFreeBlocks() + NumUsedBlocks() == NumTotalBlocks(), where free
// blocks are the never-cached free ones plus the cached unreferenced (evictable) ones.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/block_pool.h"
#include "core/prefix_cache.h"
#include "core/prefix_key.h"
#include "core/request.h"
#include "core/step_plan.h"

namespace servelab {

// The most KV blocks one pool may have (device or host): 2^24, 268M tokens at 16 per
// block, far past any GPU; the manager and its prefix cache keep arrays per block.
inline constexpr int32_t kMaxKvBlocks = int32_t{1} << 24;

// Prefix-cache counters of one KV manager (vLLM's prefix cache stats, in tokens and in
// blocks): a query is one admission's lookup, over all of the request's tokens then.
struct PrefixCacheStats {
  int64_t queried_tokens = 0, hit_tokens = 0;
  int64_t queried_blocks = 0, hit_blocks = 0;  // blocks: ceil(tokens / block_size)
  int64_t inserted_blocks = 0, evicted_blocks = 0;
};

class KvCacheManager {
 public:
  // REQUIRES: num_blocks >= 0, block_size >= 1, 0 <= watermark_blocks <= num_blocks,
  // num_host_blocks >= 0 (the swap space on the host, in blocks).
  KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t watermark_blocks,
                 int32_t num_host_blocks = 0,
                 PrefixCacheType prefix_cache = PrefixCacheType::kNone);

  int32_t BlockSize() const { return block_size_; }
  int32_t NumTotalBlocks() const { return device_.NumTotal(); }
  int32_t NumFreeBlocks() const {
    return device_.NumFree() + (cache_ ? cache_->NumEvictable() : 0);
  }
  int32_t NumUsedBlocks() const { return NumTotalBlocks() - NumFreeBlocks(); }
  int32_t WatermarkBlocks() const { return watermark_blocks_; }
  int32_t RefCount(int32_t block) const { return device_.RefCount(block); }
  int32_t NumHostBlocks() const { return host_.NumTotal(); }
  int32_t NumFreeHostBlocks() const { return host_.NumFree(); }
  // The prefix cache, or null when scheduler.prefix_cache is none.
  const PrefixCache* Cache() const { return cache_.get(); }
  const PrefixCacheStats& CacheStats() const { return stats_; }

  // Whether `num_tokens` cached tokens of one request fit in the pool at all, alone and
  // above the watermark. A request that does not could never finish.
  bool CanEverHold(int64_t num_tokens) const {
    return BlocksFor(num_tokens) <= NumTotalBlocks() - watermark_blocks_;
  }

  // Room for `num_new_tokens` more tokens of a running request (its table then covers
  // num_computed_tokens + num_new_tokens). True: allocated. False: no room, nothing
  // changed. Inline fast path: most decode steps still fit in the last block.
  bool AllocateSlots(Request& request, int32_t num_new_tokens) {
    const int64_t tokens = int64_t{request.num_computed_tokens} + num_new_tokens;
    const auto have = static_cast<int64_t>(request.block_table.size());
    if (tokens <= have * block_size_) return true;
    const int32_t needed = BlocksFor(tokens) - static_cast<int32_t>(have);
    if (needed > NumFreeBlocks()) return false;
    Grow(request, needed);
    return true;
  }

  // Tokens of a waiting request that admitting it now would take from the prefix
  // cache: a multiple of the block size, < NumTokens(); 0 without a cache, for a
  // swapped-out request, or one holding blocks.
  // Cheap to ask again for a waiting request (policies rank by it every step): the
  // lookup resumes where the request's last one ended while that prefix is intact.
  int32_t CachedPrefixTokens(const Request& request) const {
    return MatchLength(request) * block_size_;
  }
  // The last block of that cached prefix (the radix tree's node where the request's
  // match ends), or -1 when nothing is cached.
  int32_t LastCachedBlock(const Request& request) const {
    return MatchLength(request) > 0 ? hints_[static_cast<size_t>(request.slot)].last_block : -1;
  }

  // Whether a waiting request could be admitted with room for `num_tokens` more tokens
  // after its cached prefix, the watermark kept free (a swapped-out request's blocks
  // counted as coming back; matched evictable blocks counted as taken).
  bool CanAdmit(const Request& request, int32_t num_tokens) const {
    return NumFreeBlocks() - DeviceBlocksToAdmit(request, num_tokens) >= watermark_blocks_;
  }
  // Admits a waiting request when CanAdmit(request, num_reserved_tokens): brings a
  // swapped-out request's blocks back (host -> device copies appended to `swap_in`), or
  // shares its cached prefix (num_computed_tokens += CachedPrefixTokens()), and
  // allocates room for `num_new_tokens` (<= num_reserved_tokens) after it. False:
  // nothing changed.
  bool Admit(Request& request, int32_t num_new_tokens, int32_t num_reserved_tokens,
             std::vector<BlockCopy>& swap_in);

  // A running request's computed tokens grow (grew) from `from_tokens` to `to_tokens` in
  // the step being committed: its blocks that become full and have a key are registered
  // in the prefix cache.
  // With a cache that deduplicates (radix), a block already cached under its key is
  // replaced in the request's table by the cached one, and its own freed.
  // (Hot: once per scheduled request per step. REQUIRES: Cache() != nullptr.)
  void CacheComputedBlocks(Request& request, int32_t from_tokens, int32_t to_tokens) {
    const int32_t first = BlockOf(from_tokens);
    if (BlockOf(to_tokens) != first) InsertBlocks(request, first, BlockOf(to_tokens));
  }

  // Moves every block of a running request to the host (device -> host copies appended
  // to `copies`); its computed tokens survive. False, with nothing changed, when the
  // host pool lacks room. REQUIRES without a prefix cache: its blocks are not shared.
  bool SwapOut(Request& request, std::vector<BlockCopy>& copies);
  bool IsSwappedOut(const Request& request) const {
    return request.slot >= 0 && static_cast<size_t>(request.slot) < host_tables_.size() &&
           host_tables_[static_cast<size_t>(request.slot)].swapped;
  }
  // Drops every block the request holds, on the device or, swapped out, on the host.
  void Free(Request& request);

 private:
  struct HostTable {
    bool swapped = false;
    std::vector<int32_t> blocks;  // host block ids, token order
  };

  // The block holding token `index` (a shift for the usual power-of-two sizes).
  int32_t BlockOf(int32_t index) const {
    return block_shift_ >= 0 ? index >> block_shift_ : index / block_size_;
  }
  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }
  // Device blocks that admitting `request` with room for `num_tokens` more takes.
  int32_t DeviceBlocksToAdmit(const Request& request, int32_t num_tokens) const;
  void Grow(Request& request, int32_t count);
  HostTable& HostTableOf(const Request& request);
  // A free block with one reference: a never-cached one, else an evicted one.
  int32_t TakeBlock();
  // One holder of `block` fewer: at 0 it stays cached (evictable) or goes free.
  void ReleaseBlock(int32_t block);
  // Leading cached blocks of a waiting request (see CachedPrefixTokens), left in
  // match_.blocks; memoized until the cache or the request changes.
  int32_t MatchPrefix(const Request& request) const;
  // The same count through the request's hint (hints_), without the block list.
  int32_t MatchLength(const Request& request) const;
  bool MayMatch(const Request& request) const {
    return cache_ != nullptr && request.block_table.empty() && request.num_computed_tokens == 0 &&
           !IsSwappedOut(request);
  }
  int32_t MatchLimit(const Request& request) const {
    // The last token is always computed, so that the step samples from its logits.
    return std::min(NumKeyedBlocks(request, block_size_), (request.NumTokens() - 1) / block_size_);
  }
  // Registers blocks [first_block, end_block) that have a key.
  void InsertBlocks(Request& request, int32_t first_block, int32_t end_block);

  // Where a waiting request's last lookup ended, by slot. Still a valid start while the
  // request is the same and that prefix is cached: in the radix tree, when its last block
  // still holds its key (a cached node's ancestors are cached); in the hash table, when
  // nothing was evicted since (it can drop any block).
  struct PrefixHint {
    int64_t request_id = -1;
    int32_t blocks = 0;
    int32_t last_block = -1;
    int64_t evictions = 0;  // stats_.evicted_blocks when taken
  };
  struct Match {
    int64_t request_id = -1;
    const Request* request = nullptr;
    int32_t num_tokens = -1;  // request.NumTokens() when matched
    uint64_t epoch = 0;       // epoch_ when matched
    std::vector<int32_t> blocks;
    int32_t num_unreferenced = 0;  // of `blocks`, those evictable now (admission takes them)
  };

  int32_t block_size_;
  int32_t block_shift_;  // log2(block_size_) when a power of two, else -1
  int32_t watermark_blocks_;
  BlockPool device_;
  BlockPool host_;
  std::vector<HostTable> host_tables_;  // by Request::slot; grown on the first swap
  std::unique_ptr<PrefixCache> cache_;  // null: no prefix caching
  PrefixCacheStats stats_;
  uint64_t epoch_ = 1;    // bumped by every change of the cache's blocks
  mutable Match match_;   // the last MatchPrefix (a reused scratch)
  mutable std::vector<PrefixHint> hints_;  // by Request::slot, grown on first use
};

}  // namespace servelab
