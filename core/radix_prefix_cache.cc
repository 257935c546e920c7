#include "core/radix_prefix_cache.h"

#include <algorithm>
#include <functional>

#include "core/status.h"

namespace servelab {

RadixPrefixCache::RadixPrefixCache(const BlockPool& pool)
    : pool_(pool),
      root_(pool.NumTotal()),
      table_(pool.NumTotal()),
      key_(pool.NumTotal(), 0),
      cached_(pool.NumTotal(), 0),
      parent_(pool.NumTotal() + 1, -1),
      first_child_(pool.NumTotal() + 1, -1),
      next_sibling_(pool.NumTotal() + 1, -1),
      prev_sibling_(pool.NumTotal() + 1, -1),
      num_children_(pool.NumTotal() + 1, 0),
      stamp_(pool.NumTotal() + 1, 0) {
  heap_.reserve(2 * static_cast<size_t>(pool.NumTotal()) + 16);
}

std::vector<int32_t> RadixPrefixCache::Children(int32_t node) const {
  std::vector<int32_t> children;
  for (int32_t c = first_child_[node]; c >= 0; c = next_sibling_[c]) children.push_back(c);
  return children;
}

bool RadixPrefixCache::IsEvictableLeaf(int32_t block) const {
  return cached_[block] != 0 && num_children_[block] == 0 && pool_.RefCount(block) == 0;
}

void RadixPrefixCache::PushLeaf(int32_t block) {
  if (heap_.size() + 1 > heap_.capacity()) RebuildHeap();
  heap_.emplace_back(stamp_[block], block);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

// Drops stale entries: keeps one per evictable leaf, at its current stamp.
void RadixPrefixCache::RebuildHeap() {
  heap_.clear();
  for (int32_t b = 0; b < root_; ++b) {
    if (IsEvictableLeaf(b)) heap_.emplace_back(stamp_[b], b);
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
}

void RadixPrefixCache::Touch(int32_t block) {
  SERVELAB_CHECK(cached_[block] != 0);
  if (pool_.RefCount(block) == 0) --num_unreferenced_;
  stamp_[block] = ++clock_;  // any heap entry of it is now stale
}

bool RadixPrefixCache::Insert(uint64_t key, int32_t block, int32_t parent) {
  SERVELAB_CHECK(cached_[block] == 0 && pool_.RefCount(block) > 0);
  if (parent >= 0 && cached_[parent] == 0) return false;  // its prefix is not in the tree
  if (!table_.Insert(key, block)) return false;
  const int32_t p = parent >= 0 ? parent : root_;
  key_[block] = key;
  cached_[block] = 1;
  parent_[block] = p;
  first_child_[block] = -1;
  num_children_[block] = 0;
  prev_sibling_[block] = -1;
  next_sibling_[block] = first_child_[p];
  if (first_child_[p] >= 0) prev_sibling_[first_child_[p]] = block;
  first_child_[p] = block;
  ++num_children_[p];
  stamp_[block] = ++clock_;
  return true;
}

void RadixPrefixCache::Unreferenced(int32_t block) {
  SERVELAB_CHECK(cached_[block] != 0 && pool_.RefCount(block) == 0);
  ++num_unreferenced_;
  if (num_children_[block] == 0) PushLeaf(block);
}

int32_t RadixPrefixCache::Evict() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const auto [stamp, block] = heap_.back();
    heap_.pop_back();
    if (!IsEvictableLeaf(block) || stamp_[block] != stamp) continue;  // stale
    SERVELAB_CHECK(table_.Erase(key_[block]));
    const int32_t p = parent_[block];
    if (prev_sibling_[block] >= 0) {
      next_sibling_[prev_sibling_[block]] = next_sibling_[block];
    } else {
      first_child_[p] = next_sibling_[block];
    }
    if (next_sibling_[block] >= 0) prev_sibling_[next_sibling_[block]] = prev_sibling_[block];
    --num_children_[p];
    cached_[block] = 0;
    parent_[block] = -1;
    --num_unreferenced_;
    if (p != root_ && IsEvictableLeaf(p)) PushLeaf(p);
    return block;
  }
  // Every unreferenced cached block has only unreferenced descendants (a holder of a
  // block holds its parent), so some leaf is evictable whenever one is unreferenced.
  SERVELAB_CHECK_MSG(num_unreferenced_ == 0, "radix tree: unreferenced blocks but no leaf");
  return -1;
}

}  // namespace servelab
