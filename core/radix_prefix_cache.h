#pragma once
// SGLang's RadixAttention (core/prefix_cache.h) over paged KV: the cached blocks form a
// tree under a root, each block a node whose parent is the block before it; a path from
// the root spells a cached prefix, and a run of single-child nodes is one edge of the
// radix tree. Eviction takes unreferenced leaves only, least recently used first (a
// match or an insert stamps a node with a logical clock; ties cannot occur), and a
// parent whose last child goes becomes a leaf in turn.
//
// Layout: flat arrays by block id (root = NumTotal()), children in an intrusive
// sibling list, lookups through one table keyed by the block key -- which already names
// the whole path from the root, so a per-node child map would add nothing. The LRU
// order is a binary heap of (stamp, leaf) with stale entries skipped when popped and
// dropped by a rebuild when they pile up; nothing allocates after construction.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/block_key_table.h"
#include "core/prefix_cache.h"

namespace servelab {

class RadixPrefixCache final : public PrefixCache {
 public:
  explicit RadixPrefixCache(const BlockPool& pool);

  std::string_view Name() const override { return "radix"; }
  int32_t Find(uint64_t key) const override { return table_.Find(key); }
  void Touch(int32_t block) override;
  bool Insert(uint64_t key, int32_t block, int32_t parent) override;
  bool Deduplicates() const override { return true; }
  bool KeepsPrefixesWhole() const override { return true; }
  void Unreferenced(int32_t block) override;
  int32_t Evict() override;
  bool IsCached(int32_t block) const override { return cached_[block] != 0; }
  int32_t NumCached() const override { return table_.Size(); }
  int32_t NumEvictable() const override { return num_unreferenced_; }

  // The tree, for tests and inspection: the root's id, and a node's children (most
  // recently inserted first).
  int32_t Root() const { return root_; }
  // A cached block's parent node (Root() for a first block). REQUIRES: IsCached(block).
  int32_t Parent(int32_t block) const { return parent_[block]; }
  std::vector<int32_t> Children(int32_t node) const;

 private:
  using Entry = std::pair<uint64_t, int32_t>;  // (stamp, block), min-heap on stamp
  bool IsEvictableLeaf(int32_t block) const;
  void PushLeaf(int32_t block);
  void RebuildHeap();

  const BlockPool& pool_;
  int32_t root_;
  BlockKeyTable table_;
  std::vector<uint64_t> key_;      // by block, valid while cached
  std::vector<uint8_t> cached_;
  std::vector<int32_t> parent_;    // by node (root_ included); -1 for the root
  std::vector<int32_t> first_child_, next_sibling_, prev_sibling_;  // -1 ends
  std::vector<int32_t> num_children_;
  std::vector<uint64_t> stamp_;    // last use, logical clock
  uint64_t clock_ = 0;
  std::vector<Entry> heap_;        // evictable leaves (and stale entries)
  int32_t num_unreferenced_ = 0;   // cached blocks with reference count 0
};

}  // namespace servelab
