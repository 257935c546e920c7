#pragma once
// Paged KV cache accounting: fixed-size blocks, a block table per request, reference
// counts (a block shared by several requests' prefixes is freed when the last one lets
// go), and a watermark kept free at admission so running requests can still grow.
//
// Invariants (CHECKed): every block is either on the free list with ref count 0, or
// referenced by >= 1 block table with ref count equal to the number of tables holding
// it; NumFreeBlocks() + NumUsedBlocks() == NumTotalBlocks().
#include <cstdint>
#include <vector>

#include "core/request.h"
#include "core/step_plan.h"

namespace servelab {

class KvCacheManager {
 public:
  // REQUIRES: num_blocks >= 0, block_size >= 1, 0 <= watermark_blocks <= num_blocks,
  // num_host_blocks >= 0 (the swap space on the host, in blocks).
  KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t watermark_blocks,
                 int32_t num_host_blocks = 0);

  int32_t BlockSize() const { return block_size_; }
  int32_t NumTotalBlocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t NumFreeBlocks() const { return static_cast<int32_t>(free_blocks_.size()); }
  int32_t NumUsedBlocks() const { return NumTotalBlocks() - NumFreeBlocks(); }
  int32_t WatermarkBlocks() const { return watermark_blocks_; }
  int32_t RefCount(int32_t block) const { return ref_counts_[block]; }

  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }
  // New blocks `request` needs so that its table covers num_computed_tokens + num_new.
  // Inline fast path: most decode steps still fit in the last block (no division).
  int32_t BlocksNeeded(const Request& request, int32_t num_new_tokens) const {
    const int64_t tokens = int64_t{request.num_computed_tokens} + num_new_tokens;
    const auto have = static_cast<int64_t>(request.block_table.size());
    if (tokens <= have * block_size_) return 0;
    return BlocksFor(tokens) - static_cast<int32_t>(have);
  }

  // Can `request` get the blocks for `num_new_tokens` more tokens? Admission (a request
  // not yet running) must also leave the watermark free; growth may use it.
  bool CanAllocate(const Request& request, int32_t num_new_tokens, bool admission) const {
    const int32_t reserve = admission ? watermark_blocks_ : 0;
    return NumFreeBlocks() - BlocksNeeded(request, num_new_tokens) >= reserve;
  }
  // Extends the block table. REQUIRES: CanAllocate(request, num_new_tokens, false).
  void Allocate(Request& request, int32_t num_new_tokens) {
    const int32_t needed = BlocksNeeded(request, num_new_tokens);
    if (needed > 0) AllocateBlocks(request, needed);
  }
  // Makes `request` share `block` (a cached prefix block): ref count + 1.
  void Share(Request& request, int32_t block);
  // Drops the request's references; blocks whose count reaches 0 return to the free list
  // (the host pool's, when the request is swapped out).
  void Free(Request& request);

  // Swap space. A swapped-out request's block table holds host block ids and
  // request.kv_swapped is set; its num_computed_tokens are kept.
  int32_t NumHostBlocks() const { return num_host_blocks_; }
  int32_t NumFreeHostBlocks() const { return static_cast<int32_t>(free_host_blocks_.size()); }
  bool CanSwapOut(const Request& request) const;
  // Moves every block of `request` to the host, appending device->host copies.
  // REQUIRES: CanSwapOut(request); the request's blocks are not shared.
  void SwapOut(Request& request, std::vector<BlockCopy>& copies);
  // Can `request` come back and then grow by `num_new_tokens`? (Admission: keeps the
  // watermark.)
  bool CanSwapIn(const Request& request, int32_t num_new_tokens) const;
  // Moves every block of a swapped-out request back to the device, appending
  // host->device copies. REQUIRES: CanSwapIn(request, 0).
  void SwapIn(Request& request, std::vector<BlockCopy>& copies);

 private:
  void AllocateBlocks(Request& request, int32_t count);

  int32_t block_size_;
  int32_t watermark_blocks_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_blocks_;  // a stack: the most recently freed block is reused first
  int32_t num_host_blocks_;
  std::vector<int32_t> free_host_blocks_;  // a stack, like free_blocks_
};

}  // namespace servelab
