#include "core/kv_cache_manager.h"

#include <algorithm>

#include "core/status.h"

namespace servelab {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t watermark_blocks,
                               int32_t num_host_blocks)
    : block_size_(block_size),
      watermark_blocks_(watermark_blocks),
      ref_counts_(num_blocks, 0),
      num_host_blocks_(num_host_blocks) {
  SERVELAB_CHECK(num_blocks >= 0 && block_size >= 1 && num_host_blocks >= 0);
  SERVELAB_CHECK(watermark_blocks >= 0 && watermark_blocks <= num_blocks);
  free_blocks_.reserve(num_blocks);
  // Lowest ids on top of the stack so a fresh cache hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
  free_host_blocks_.reserve(num_host_blocks);
  for (int32_t b = num_host_blocks - 1; b >= 0; --b) free_host_blocks_.push_back(b);
}

void KvCacheManager::AllocateBlocks(Request& request, int32_t count) {
  SERVELAB_CHECK(count <= NumFreeBlocks());
  while (count-- > 0) {
    const int32_t block = free_blocks_.back();
    free_blocks_.pop_back();
    SERVELAB_CHECK(ref_counts_[block] == 0);
    ref_counts_[block] = 1;
    request.block_table.push_back(block);
  }
}

void KvCacheManager::Share(Request& request, int32_t block) {
  SERVELAB_CHECK(block >= 0 && block < NumTotalBlocks() && ref_counts_[block] > 0);
  ++ref_counts_[block];
  request.block_table.push_back(block);
}

void KvCacheManager::Free(Request& request) {
  if (request.kv_swapped) {
    for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
      free_host_blocks_.push_back(*it);
    }
    request.block_table.clear();
    request.kv_swapped = false;
    return;
  }
  // Release in reverse so the request's first block ends on top of the free stack.
  for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
    const int32_t block = *it;
    SERVELAB_CHECK_MSG(ref_counts_[block] > 0, "double free of KV block");
    if (--ref_counts_[block] == 0) free_blocks_.push_back(block);
  }
  request.block_table.clear();
}

bool KvCacheManager::CanSwapOut(const Request& request) const {
  return !request.kv_swapped &&
         static_cast<int32_t>(request.block_table.size()) <= NumFreeHostBlocks();
}

void KvCacheManager::SwapOut(Request& request, std::vector<BlockCopy>& copies) {
  SERVELAB_CHECK(CanSwapOut(request));
  for (int32_t& block : request.block_table) {
    SERVELAB_CHECK_MSG(ref_counts_[block] == 1, "swapping out a shared KV block");
    const int32_t host = free_host_blocks_.back();
    free_host_blocks_.pop_back();
    copies.push_back(BlockCopy{block, host});
    ref_counts_[block] = 0;
    free_blocks_.push_back(block);
    block = host;
  }
  request.kv_swapped = true;
}

bool KvCacheManager::CanSwapIn(const Request& request, int32_t num_new_tokens) const {
  if (!request.kv_swapped) return false;
  const auto have = static_cast<int32_t>(request.block_table.size());
  const int32_t needed = BlocksFor(int64_t{request.num_computed_tokens} + num_new_tokens);
  return NumFreeBlocks() - std::max(have, needed) >= watermark_blocks_;
}

void KvCacheManager::SwapIn(Request& request, std::vector<BlockCopy>& copies) {
  SERVELAB_CHECK(request.kv_swapped &&
                 static_cast<int32_t>(request.block_table.size()) <= NumFreeBlocks());
  for (int32_t& host : request.block_table) {
    const int32_t block = free_blocks_.back();
    free_blocks_.pop_back();
    SERVELAB_CHECK(ref_counts_[block] == 0);
    ref_counts_[block] = 1;
    copies.push_back(BlockCopy{host, block});
    free_host_blocks_.push_back(host);
    host = block;
  }
  request.kv_swapped = false;
}

}  // namespace servelab
