#pragma once
// A pool of fixed-size KV blocks: ids 0..N-1, a reference count each, and a stack of
// free ones (the most recently freed block is reused first; a fresh pool hands out 0, 1,
// 2, ...). The KV manager keeps one for device memory and one for the host swap space.
//
// Invariant (CHECKed): a block on the free stack has reference count 0. Without a prefix
// cache the converse holds too (Release frees at 0). With one, the KV manager uses
// Unref/Ref/PushFree instead: a cached block whose count drops to 0 stays out of the
// free stack, evictable (core/prefix_cache.h), and a request that matches it takes a
// reference again (Ref from 0).
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace servelab {

class BlockPool {
 public:
  // REQUIRES: num_blocks >= 0.
  explicit BlockPool(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
    SERVELAB_CHECK(num_blocks >= 0);
    free_.reserve(num_blocks);
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }

  int32_t NumTotal() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t NumFree() const { return static_cast<int32_t>(free_.size()); }
  int32_t RefCount(int32_t block) const { return ref_counts_[block]; }

  // A free block, now with one reference. REQUIRES: NumFree() > 0.
  int32_t Take() {
    SERVELAB_CHECK(!free_.empty());
    const int32_t block = free_.back();
    free_.pop_back();
    SERVELAB_CHECK(ref_counts_[block] == 0);
    ref_counts_[block] = 1;
    return block;
  }
  // One more holder of a block in use.
  void Share(int32_t block) {
    SERVELAB_CHECK(block >= 0 && block < NumTotal() && ref_counts_[block] > 0);
    ++ref_counts_[block];
  }
  // One holder fewer; the last one returns the block to the free stack.
  void Release(int32_t block) {
    if (Unref(block)) free_.push_back(block);
  }

  // With a prefix cache. One holder fewer; true when that was the last (the block is
  // then on no list: the caller caches it or PushFree()s it).
  bool Unref(int32_t block) {
    SERVELAB_CHECK_MSG(ref_counts_[block] > 0, "double free of KV block");
    return --ref_counts_[block] == 0;
  }
  // One holder more of a block not on the free stack (a cached one, maybe unreferenced).
  void Ref(int32_t block) { ++ref_counts_[block]; }
  // An unreferenced block that is on no list goes back to the free stack.
  void PushFree(int32_t block) {
    SERVELAB_CHECK(ref_counts_[block] == 0);
    free_.push_back(block);
  }

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack
};

}  // namespace servelab
