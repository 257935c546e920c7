#pragma once
// Paged KV cache accounting, behind an API that speaks tokens, not blocks (vLLM's
// allocate_slots): the scheduler asks for room for N more tokens of a request and gets
// yes or no; block tables, reference counts, the watermark and the swap space stay in
// here.
//
//   running request   AllocateSlots(r, n): room for n more tokens, or false with nothing
//                     changed (the scheduler then preempts or stalls); may use the
//                     watermark.
//   waiting request   CanAdmit(r, n) / Admit(r, n, whole, swap_in): admission keeps the
//                     watermark free and asks for room for the request's whole remaining
//                     prefill (`whole`) while allocating this step's chunk (`n`); a
//                     swapped-out request's blocks come back first (host -> device
//                     copies appended to swap_in).
//   preemption        SwapOut(r, copies) (false when the host pool has no room: the
//                     caller recomputes instead) or Free(r).
//
// Request::block_table holds the DEVICE block ids of a request's KV, in token order; it
// is written here only, and is empty while the request is swapped out. The host ids of a
// swapped-out request live here, per request slot (Request::slot, which the scheduler
// gives each request it accepts).
//
// Where a prefix cache plugs in (SGLang's match_prefix / insert / evict): Admit is where
// a request's cached prefix would be matched (its blocks shared, its computed tokens
// starting after them), AllocateSlots where full blocks would be inserted, and the
// device BlockPool where freed cached blocks would wait, evictable (core/block_pool.h).
//
// Invariants (CHECKed): a device block's reference count equals the number of block
// tables holding it; NumFreeBlocks() + NumUsedBlocks() == NumTotalBlocks().
#include <cstdint>
#include <vector>

#include "core/block_pool.h"
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
  int32_t NumTotalBlocks() const { return device_.NumTotal(); }
  int32_t NumFreeBlocks() const { return device_.NumFree(); }
  int32_t NumUsedBlocks() const { return NumTotalBlocks() - NumFreeBlocks(); }
  int32_t WatermarkBlocks() const { return watermark_blocks_; }
  int32_t RefCount(int32_t block) const { return device_.RefCount(block); }
  int32_t NumHostBlocks() const { return host_.NumTotal(); }
  int32_t NumFreeHostBlocks() const { return host_.NumFree(); }

  // Whether `num_tokens` cached tokens of one request fit in the pool at all, alone and
  // above the watermark. A request that does not could never finish.
  bool CanEverHold(int64_t num_tokens) const {
    return BlocksFor(num_tokens) <= NumTotalBlocks() - watermark_blocks_;
  }

  // Room for `num_new_tokens` more tokens of a running request (its table then covers
  // num_computed_tokens + num_new_tokens). True: allocated. False: no room, nothing
  // changed. Inline fast path: most decode steps still fit in the last block.
  bool AllocateSlots(Request& request, int32_t num_new_tokens) {
    const int64_t tokens = int64_t{request.num_computed_tokens} + num_new_tokens;
    const auto have = static_cast<int64_t>(request.block_table.size());
    if (tokens <= have * block_size_) return true;
    const int32_t needed = BlocksFor(tokens) - static_cast<int32_t>(have);
    if (needed > NumFreeBlocks()) return false;
    Grow(request, needed);
    return true;
  }

  // Whether a waiting request could be admitted with room for `num_tokens` more tokens,
  // the watermark kept free (a swapped-out request's blocks counted as coming back).
  bool CanAdmit(const Request& request, int32_t num_tokens) const {
    return NumFreeBlocks() - DeviceBlocksToAdmit(request, num_tokens) >= watermark_blocks_;
  }
  // Admits a waiting request when CanAdmit(request, num_reserved_tokens): brings a
  // swapped-out request's blocks back (host -> device copies appended to `swap_in`) and
  // allocates room for `num_new_tokens` (<= num_reserved_tokens). False: nothing changed.
  bool Admit(Request& request, int32_t num_new_tokens, int32_t num_reserved_tokens,
             std::vector<BlockCopy>& swap_in);

  // Moves every block of a running request to the host (device -> host copies appended
  // to `copies`); its computed tokens survive. False, with nothing changed, when the
  // host pool lacks room. REQUIRES: the request's blocks are not shared.
  bool SwapOut(Request& request, std::vector<BlockCopy>& copies);
  bool IsSwappedOut(const Request& request) const {
    return request.slot >= 0 && static_cast<size_t>(request.slot) < host_tables_.size() &&
           host_tables_[static_cast<size_t>(request.slot)].swapped;
  }
  // Drops every block the request holds, on the device or, swapped out, on the host.
  void Free(Request& request);

 private:
  struct HostTable {
    bool swapped = false;
    std::vector<int32_t> blocks;  // host block ids, token order
  };

  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }
  // Device blocks that admitting `request` with room for `num_tokens` more takes.
  int32_t DeviceBlocksToAdmit(const Request& request, int32_t num_tokens) const;
  void Grow(Request& request, int32_t count);
  HostTable& HostTableOf(const Request& request);

  int32_t block_size_;
  int32_t watermark_blocks_;
  BlockPool device_;
  BlockPool host_;
  std::vector<HostTable> host_tables_;  // by Request::slot; grown on the first swap
};

}  // namespace servelab
