#include "core/hash_prefix_cache.h"

#include "core/status.h"

namespace servelab {

HashPrefixCache::HashPrefixCache(const BlockPool& pool)
    : pool_(pool),
      table_(pool.NumTotal()),
      key_(pool.NumTotal(), 0),
      cached_(pool.NumTotal(), 0),
      prev_(pool.NumTotal(), -1),
      next_(pool.NumTotal(), -1),
      in_lru_(pool.NumTotal(), 0) {}

void HashPrefixCache::Append(int32_t block) {
  prev_[block] = tail_;
  next_[block] = -1;
  if (tail_ >= 0) next_[tail_] = block; else head_ = block;
  tail_ = block;
  in_lru_[block] = 1;
  ++num_evictable_;
}

void HashPrefixCache::Unlink(int32_t block) {
  const int32_t p = prev_[block], n = next_[block];
  if (p >= 0) next_[p] = n; else head_ = n;
  if (n >= 0) prev_[n] = p; else tail_ = p;
  in_lru_[block] = 0;
  --num_evictable_;
}

void HashPrefixCache::Touch(int32_t block) {
  SERVELAB_CHECK(cached_[block] != 0);
  if (in_lru_[block] != 0) Unlink(block);
}

bool HashPrefixCache::Insert(uint64_t key, int32_t block, int32_t /*parent*/) {
  SERVELAB_CHECK(cached_[block] == 0 && pool_.RefCount(block) > 0);
  if (!table_.Insert(key, block)) return false;
  key_[block] = key;
  cached_[block] = 1;
  return true;
}

void HashPrefixCache::Unreferenced(int32_t block) {
  SERVELAB_CHECK(cached_[block] != 0 && in_lru_[block] == 0 && pool_.RefCount(block) == 0);
  Append(block);
}

int32_t HashPrefixCache::Evict() {
  const int32_t block = head_;
  if (block < 0) return -1;
  Unlink(block);
  SERVELAB_CHECK(table_.Erase(key_[block]));
  cached_[block] = 0;
  return block;
}

}  // namespace servelab
