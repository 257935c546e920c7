#pragma once
// vLLM's automatic prefix caching (core/prefix_cache.h): a table from block key to
// block, and the evictable blocks in one LRU list by release time. Any evictable block
// may go, the least recently released first, even if blocks cached after it in the
// same prefix stay (they are then unreachable by a match until evicted in turn).
#include <cstdint>
#include <vector>

#include "core/block_key_table.h"
#include "core/prefix_cache.h"

namespace servelab {

class HashPrefixCache final : public PrefixCache {
 public:
  explicit HashPrefixCache(const BlockPool& pool);

  std::string_view Name() const override { return "hash"; }
  int32_t Find(uint64_t key) const override { return table_.Find(key); }
  void Touch(int32_t block) override;
  bool Insert(uint64_t key, int32_t block, int32_t parent) override;
  bool Deduplicates() const override { return false; }
  bool KeepsPrefixesWhole() const override { return false; }
  void Unreferenced(int32_t block) override;
  int32_t Evict() override;
  bool IsCached(int32_t block) const override { return cached_[block] != 0; }
  int32_t NumCached() const override { return table_.Size(); }
  int32_t NumEvictable() const override { return num_evictable_; }

 private:
  void Append(int32_t block);  // at the LRU tail
  void Unlink(int32_t block);

  const BlockPool& pool_;
  BlockKeyTable table_;
  std::vector<uint64_t> key_;     // by block, valid while cached
  std::vector<uint8_t> cached_;   // by block
  // The evictable blocks, least recently released first: a doubly linked list through
  // prev_/next_ (-1 ends it); in_lru_ marks membership.
  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_lru_;
  int32_t head_ = -1, tail_ = -1;
  int32_t num_evictable_ = 0;
};

}  // namespace servelab
