#include "core/kv_cache_manager.h"

#include <algorithm>
#include <bit>

#include "core/status.h"

namespace servelab {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t watermark_blocks,
                               int32_t num_host_blocks, PrefixCacheType prefix_cache)
    : block_size_(block_size),
      block_shift_(std::has_single_bit(static_cast<uint32_t>(block_size))
                       ? std::countr_zero(static_cast<uint32_t>(block_size))
                       : -1),
      watermark_blocks_(watermark_blocks),
      device_(num_blocks),
      host_(num_host_blocks),
      cache_(MakePrefixCache(prefix_cache, device_)) {
  SERVELAB_CHECK(block_size >= 1 && num_host_blocks >= 0);
  SERVELAB_CHECK(num_blocks <= kMaxKvBlocks && num_host_blocks <= kMaxKvBlocks);
  SERVELAB_CHECK(watermark_blocks >= 0 && watermark_blocks <= num_blocks);
}

int32_t KvCacheManager::TakeBlock() {
  if (cache_ != nullptr && device_.NumFree() == 0) {
    const int32_t evicted = cache_->Evict();
    SERVELAB_CHECK_MSG(evicted >= 0, "no free or evictable KV block");
    device_.PushFree(evicted);
    ++stats_.evicted_blocks;
    ++epoch_;
  }
  return device_.Take();
}

void KvCacheManager::ReleaseBlock(int32_t block) {
  if (cache_ == nullptr) {
    device_.Release(block);
    return;
  }
  ++epoch_;
  if (!device_.Unref(block)) return;
  if (cache_->IsCached(block)) {
    cache_->Unreferenced(block);
  } else {
    device_.PushFree(block);
  }
}

void KvCacheManager::Grow(Request& request, int32_t count) {
  SERVELAB_CHECK(count <= NumFreeBlocks());
  if (cache_ == nullptr) {  // (hot: every block a decode opens)
    while (count-- > 0) request.block_table.push_back(device_.Take());
    return;
  }
  ++epoch_;
  while (count-- > 0) request.block_table.push_back(TakeBlock());
}

int32_t KvCacheManager::MatchLength(const Request& request) const {
  if (!MayMatch(request)) return 0;
  SERVELAB_CHECK(request.slot >= 0);
  const auto slot = static_cast<size_t>(request.slot);
  if (slot >= hints_.size()) hints_.resize(slot + 1);
  PrefixHint& hint = hints_[slot];
  const int32_t limit = MatchLimit(request);
  bool intact = hint.request_id == request.id;
  if (intact && hint.blocks > 0) {
    intact = cache_->KeepsPrefixesWhole()
                 ? cache_->Find(BlockKey(request, hint.blocks - 1, block_size_)) == hint.last_block
                 : hint.evictions == stats_.evicted_blocks;
  }
  if (!intact || hint.blocks > limit) hint = PrefixHint{request.id, 0, -1, 0};
  hint.evictions = stats_.evicted_blocks;
  for (int32_t k = hint.blocks; k < limit; ++k) {
    const int32_t block = cache_->Find(BlockKey(request, k, block_size_));
    if (block < 0) break;
    hint.blocks = k + 1;
    hint.last_block = block;
  }
  return hint.blocks;
}

int32_t KvCacheManager::MatchPrefix(const Request& request) const {
  if (!MayMatch(request)) return 0;
  if (match_.request == &request && match_.request_id == request.id &&
      match_.num_tokens == request.NumTokens() && match_.epoch == epoch_) {
    return static_cast<int32_t>(match_.blocks.size());
  }
  match_.request_id = request.id;
  match_.request = &request;
  match_.num_tokens = request.NumTokens();
  match_.epoch = epoch_;
  match_.blocks.clear();
  match_.num_unreferenced = 0;
  const int32_t limit = MatchLimit(request);
  for (int32_t k = 0; k < limit; ++k) {
    const int32_t block = cache_->Find(BlockKey(request, k, block_size_));
    if (block < 0) break;
    match_.blocks.push_back(block);
    if (device_.RefCount(block) == 0) ++match_.num_unreferenced;
  }
  return static_cast<int32_t>(match_.blocks.size());
}

void KvCacheManager::InsertBlocks(Request& request, int32_t first_block, int32_t end_block) {
  const int32_t end = std::min(end_block, std::min(NumKeyedBlocks(request, block_size_),
                                                   static_cast<int32_t>(request.block_table.size())));
  for (int32_t k = first_block; k < end; ++k) {
    const int32_t block = request.block_table[static_cast<size_t>(k)];
    const int32_t parent = k > 0 ? request.block_table[static_cast<size_t>(k) - 1] : -1;
    const uint64_t key = BlockKey(request, k, block_size_);
    if (cache_->Insert(key, block, parent)) {
      ++stats_.inserted_blocks;
      ++epoch_;
      continue;
    }
    const int32_t cached = cache_->Find(key);
    // Only under a cached parent: a holder of a cached block holds its whole prefix.
    if (cached < 0 || cached == block || !cache_->Deduplicates() ||
        (parent >= 0 && !cache_->IsCached(parent))) {
      continue;
    }
    cache_->Touch(cached);  // before the reference, as a match
    device_.Ref(cached);
    request.block_table[static_cast<size_t>(k)] = cached;
    ReleaseBlock(block);
    ++epoch_;
  }
}

KvCacheManager::HostTable& KvCacheManager::HostTableOf(const Request& request) {
  SERVELAB_CHECK_MSG(request.slot >= 0, "a request swapped out needs a slot");
  const auto slot = static_cast<size_t>(request.slot);
  if (slot >= host_tables_.size()) host_tables_.resize(slot + 1);
  return host_tables_[slot];
}

int32_t KvCacheManager::DeviceBlocksToAdmit(const Request& request, int32_t num_tokens) const {
  const int32_t matched = MatchPrefix(request);
  if (matched > 0) {
    // New blocks past the prefix, plus the matched blocks that leave the evictable set.
    return BlocksFor(int64_t{matched} * block_size_ + num_tokens) - matched +
           match_.num_unreferenced;
  }
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
      const int32_t to = TakeBlock();
      swap_in.push_back(BlockCopy{from, to});
      host_.Release(from);
      request.block_table.push_back(to);
    }
    host.blocks.clear();
    host.swapped = false;
  } else if (cache_ != nullptr && request.block_table.empty() && request.num_computed_tokens == 0) {
    const int32_t matched = MatchPrefix(request);
    stats_.queried_tokens += request.NumTokens();
    stats_.queried_blocks += BlocksFor(request.NumTokens());
    stats_.hit_tokens += int64_t{matched} * block_size_;
    stats_.hit_blocks += matched;
    if (matched > 0) {
      ++epoch_;
      for (const int32_t block : match_.blocks) {
        cache_->Touch(block);  // before the reference: it leaves the evictable set
        device_.Ref(block);
        request.block_table.push_back(block);
      }
      request.num_computed_tokens = matched * block_size_;
    }
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
    SERVELAB_CHECK_MSG(cache_ != nullptr || device_.RefCount(block) == 1,
                       "swapping out a shared KV block");
    const int32_t to = host_.Take();
    copies.push_back(BlockCopy{block, to});
    if (cache_ == nullptr) device_.Release(block);
    host.blocks.push_back(to);
  }
  if (cache_ != nullptr) {
    // Last to first, as Free does: a cached prefix outlives its tail in the LRU order.
    for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
      ReleaseBlock(*it);
    }
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
  // Release in reverse so the request's first block ends on top of the free stack (or,
  // cached, is the last of them to be evicted).
  if (cache_ == nullptr) {  // (hot: every finished request)
    for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
      device_.Release(*it);
    }
  } else {
    for (auto it = request.block_table.rbegin(); it != request.block_table.rend(); ++it) {
      ReleaseBlock(*it);
    }
  }
  request.block_table.clear();
}

}  // namespace servelab
