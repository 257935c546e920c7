#pragma once
// The CUDA runner's paged KV cache and its swap space.
//
// Device pool: one allocation of 2 x layers arrays (K, V of layer 0, K, V of layer 1,
// ...), each [num_blocks, block_size, kv_heads, head_dim] bf16, zeroed (decode-graph
// padding rows read block 0). Its size is vLLM's rule: what is left of total memory x
// memory_utilization after everything allocated so far, less a reserve, unless
// num_blocks fixes it. Host pool: pinned memory of the same array order, from
// swap_space_bytes. Block copies are cudaMemcpyAsync on the step's stream, so they
// precede the step's kernels.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "core/step_plan.h"
#include "engine/cuda/device_memory.h"
#include "kernels/kv_cache_shape.h"

namespace servelab::engine_cuda {

using bf16 = __nv_bfloat16;

struct KvPoolOptions {
  int32_t block_size = 16;
  int32_t num_blocks = 0;            // > 0: exactly this many device blocks
  double memory_utilization = 0.9;   // else: the pool fills total memory x this
  int64_t reserve_bytes = 0;         // kept free beyond the pool (graph captures)
  int64_t swap_space_bytes = 0;      // pinned host pool; 0 = none
};

class DeviceKvPool {
 public:
  // Sizes and allocates both pools for `spec`. `in_use` names what already holds device
  // memory, for the message when no block fits.
  Status Allocate(const ModelSpec& spec, const KvPoolOptions& options, const std::string& in_use,
                  cudaStream_t stream);

  const KvCapacity& Capacity() const { return capacity_; }
  kernels::KvCacheShape CacheShape() const {
    return kernels::KvCacheShape{capacity_.num_gpu_blocks, capacity_.block_size, kv_heads_,
                                 head_dim_};
  }
  bf16* K(size_t layer) const { return k_cache_[layer]; }
  bf16* V(size_t layer) const { return v_cache_[layer]; }

  // Enqueues whole-block copies (every layer's K and V) on `stream`: device -> host
  // (to_host: src device, dst host) or back. Runs of consecutive blocks move for every
  // layer in one 2D copy. REQUIRES: ids within the pools (CHECKed). A CUDA failure is
  // kept for TakeError.
  void Copy(std::span<const BlockCopy> copies, bool to_host, int32_t device, cudaStream_t stream);
  // The first copy failure since the last call (OK when none).
  Status TakeError() { return std::exchange(error_, Status::Ok()); }

 private:
  KvCapacity capacity_;
  int32_t kv_heads_ = 0, head_dim_ = 0;
  int64_t block_elems_ = 0;  // bf16 per block per layer, K or V
  DeviceArena memory_;
  std::vector<bf16*> k_cache_, v_cache_;  // per layer, into one pool allocation
  bf16* host_pool_ = nullptr;             // pinned swap pool, the same array order
  Status error_;
};

}  // namespace servelab::engine_cuda
