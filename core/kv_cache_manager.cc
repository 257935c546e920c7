#include "core/kv_cache_manager.h"

#include <algorithm>

#include "core/status.h"

namespace servelab {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t watermark_blocks,
                               int32_t num_host_blocks)
    : block_size_(block_size),
      watermark_blocks_(watermark_blocks),
      device_(num_blocks),
      host_(num_host_blocks) {
  SERVELAB_CHECK(block_size >= 1 && num_host_blocks >= 0);
  SERVELAB_CHECK(watermark_blocks >= 0 && watermark_blocks <= num_blocks);
}

void KvCacheManager::Grow(Request& request, int32_t count) {
  SERVELAB_CHECK(count <= NumFreeBlocks());
  while (count-- > 0) request.block_table.push_back(device_.Take());
}

KvCacheManager::HostTable& KvCacheManager::HostTableOf(const Request& request) {
  SERVELAB_CHECK_MSG(request.slot >= 0, "a request swapped out needs a slot");
  const auto slot = static_cast<size_t>(request.slot);
  if (slot >= host_tables_.size()) host_tables_.resize(slot + 1);
  return host_tables_[slot];
}

int32_t KvCacheManager::DeviceBlocksToAdmit(const Request& request, int32_t num_tokens) const {
  const int32_t needed = BlocksFor(int64_t{request.num_computed_tokens} + num_tokens);
  if (IsSwappedOut(request)) {
    // Every host block comes back, and the request may then grow past them.
    const auto have = static_cast<int32_t>(host_tables_[static_cast<size_t>(request.slot)].blocks.size());
    return std::max(have, needed);
  }
  return std::max(0, needed - static_cast<int32_t>(request.block_table.size()));
}

bool KvCacheManager::Admit(Request& request, int32_t num_new_tokens, int32_t num_reserved_tokens,
                           std::vector<BlockCopy>& swap_in) {
  SERVELAB_CHECK(num_new_tokens <= num_reserved_tokens);
  if (!CanAdmit(request, num_reserved_tokens)) return false;
  if (IsSwappedOut(request)) {
    HostTable& host = HostTableOf(request);
    SERVELAB_CHECK(request.block_table.empty());
    for (const int32_t from : host.blocks) {
      const int32_t to = device_.Take();
      swap_in.push_back(BlockCopy{from, to});
      host_.Release(from);
      request.block_table.push_back(to);
    }
    host.blocks.clear();
    host.swapped = false;
  }
  const bool allocated = AllocateSlots(request, num_new_tokens);
  SERVELAB_CHECK(allocated);  // reserved above
  return true;
}

bool KvCacheManager::SwapOut(Request& request, std::vector<BlockCopy>& copies) {
  SERVELAB_CHECK(!IsSwappedOut(request));
  if (static_cast<int32_t>(request.block_table.size()) > NumFreeHostBlocks()) return false;
  HostTable& host = HostTableOf(request);
  for (const int32_t block : request.block_table) {
    SERVELAB_CHECK_MSG(device_.RefCount(block) == 1, "swapping out a shared KV block");
    const int32_t to = host_.Take();
    copies.push_back(BlockCopy{block, to});
    device_.Release(block);
    host.blocks.push_back(to);
  }
  request.block_table.clear();
  host.swapped = true;
  return true;
}

void KvCacheManager::Free(Request& request) {
  if (IsSwappedOut(request)) {
    HostTable& host = HostTableOf(request);
    for (auto it = host.blocks.rbegin(); it != host.blocks.rend(); ++it) host_.Release(*it);
    host.blocks.clear();
    host.swapped = false;
  }
  // Release in reverse so the request's first block ends on top of the free stack.
  for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
    device_.Release(*it);
  }
  request.block_table.clear();
}

}  // namespace servelab
