#pragma once
// The prefix cache behind the KV manager (SGLang's BasePrefixCache: match, insert,
// evict): which device blocks hold which content, and which of them may be evicted.
//
// A cached block is a full, computed KV block registered under its key
// (core/prefix_key.h). While requests hold it (BlockPool reference count > 0) it is in
// use; when the last holder lets go it stays cached and becomes evictable, until a
// request matches it again (its count rises from 0) or the KV manager, out of free
// blocks, evicts it for reuse. Blocks that were never cached go straight back to the
// pool's free stack, and are always taken before anything is evicted.
//
// Two implementations, chosen by scheduler.prefix_cache.type:
//   hash   vLLM's automatic prefix caching: one table from key to block; evictable
//          blocks in one LRU list ordered by the time they were released (a request
//          releases its blocks last to first, so a prefix outlives its tail).
//   radix  SGLang's RadixAttention: the cached blocks form a tree (a block's parent is
//          the block before it); only unreferenced leaves are evicted, least recently
//          used first (a match or an insert counts as a use), so a prefix is never
//          dropped while a longer cached path hangs below it.
// With no eviction the two hold the same blocks and find the same matches.
//
// Invariant the KV manager keeps (and the radix tree relies on): every holder of a
// cached block holds its parent too -- a request holds a whole prefix.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/block_pool.h"
#include "core/fields.h"

namespace servelab {

class PrefixCache {
 public:
  virtual ~PrefixCache() = default;
  virtual std::string_view Name() const = 0;

  // The block cached under `key`, or -1.
  virtual int32_t Find(uint64_t key) const = 0;
  // A match used `block` (it is, or is about to be, referenced): LRU bookkeeping, and
  // it leaves the evictable set if it was there.
  virtual void Touch(int32_t block) = 0;
  // Registers `block` (full, computed, referenced) under `key`; `parent` is the block
  // before it in its request's table (-1 for a first block). False, with nothing
  // changed, when the key is cached already (the caller keeps its duplicate private),
  // or, for the radix tree, when `parent` is not the cached block of its prefix.
  virtual bool Insert(uint64_t key, int32_t block, int32_t parent) = 0;
  // Whether a request whose computed block duplicates a cached one switches to the
  // cached block and frees its own (SGLang, after inserting into the tree) rather than
  // keeping the duplicate private (vLLM).
  virtual bool Deduplicates() const = 0;
  // Whether a cached block's whole prefix is always cached too (the radix tree evicts
  // leaves only; vLLM's table may drop any block).
  virtual bool KeepsPrefixesWhole() const = 0;
  // The last holder of cached `block` let it go: it becomes evictable.
  virtual void Unreferenced(int32_t block) = 0;
  // Removes one evictable block from the cache and returns it (unreferenced, now
  // uncached), or -1 when none is evictable.
  virtual int32_t Evict() = 0;

  virtual bool IsCached(int32_t block) const = 0;
  virtual int32_t NumCached() const = 0;
  // Cached blocks with no holder: all of them can be had by evicting repeatedly.
  virtual int32_t NumEvictable() const = 0;
};

enum class PrefixCacheType : uint8_t { kNone, kHash, kRadix };
inline constexpr EnumName<PrefixCacheType> kPrefixCacheTypeNames[] = {
    {"none", PrefixCacheType::kNone},
    {"hash", PrefixCacheType::kHash},
    {"radix", PrefixCacheType::kRadix}};

// scheduler.prefix_cache. Absent: none.
struct PrefixCacheConfig {
  PrefixCacheType type = PrefixCacheType::kHash;  // when the section is present

  template <class V>
  void VisitFields(V& v) {
    v.Enum("type", type, EnumNames<PrefixCacheType>(kPrefixCacheTypeNames));
  }
};

// The cache for `type` over `pool`'s blocks (it reads their reference counts); null for
// kNone. `pool` must outlive it.
std::unique_ptr<PrefixCache> MakePrefixCache(PrefixCacheType type, const BlockPool& pool);

}  // namespace servelab
