#include "engine/cuda/device_kv_pool.h"

#include <algorithm>
#include <limits>
#include <string>

namespace servelab::engine_cuda {

Status DeviceKvPool::Allocate(const ModelSpec& s, const KvPoolOptions& options,
                              const std::string& in_use, cudaStream_t stream) {
  const auto layer_count = static_cast<int64_t>(s.num_hidden_layers);
  kv_heads_ = s.num_key_value_heads;
  head_dim_ = s.HeadDim();
  capacity_.block_size = options.block_size;
  block_elems_ = int64_t{capacity_.block_size} * s.KvDim();
  capacity_.bytes_per_block = s.KvBytesPerBlock(capacity_.block_size, sizeof(bf16));
  int64_t blocks = options.num_blocks;
  if (blocks <= 0) {
    size_t free = 0, total = 0;
    SERVELAB_CUDA_RETURN(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    const double budget = static_cast<double>(total) * options.memory_utilization -
                          static_cast<double>(total - free) -
                          static_cast<double>(options.reserve_bytes);
    blocks = budget > 0
                 ? static_cast<int64_t>(budget / static_cast<double>(capacity_.bytes_per_block))
                 : 0;
    if (blocks < 1) {
      return Internal("cuda runner: no room for a KV block: " + std::to_string(total >> 20) +
                      " MiB x memory_utilization " + std::to_string(options.memory_utilization) +
                      " is less than the " + std::to_string((total - free) >> 20) +
                      " MiB already in use (" + in_use + ")");
    }
    blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  }
  capacity_.num_gpu_blocks = static_cast<int32_t>(blocks);
  bf16* pool = nullptr;
  const int64_t pool_elems = 2 * layer_count * blocks * block_elems_;
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(pool, pool_elems, "the KV cache"));
  // Zeros, not whatever the allocation held: graph padding rows read block 0.
  SERVELAB_CUDA_RETURN(
      cudaMemsetAsync(pool, 0, static_cast<size_t>(pool_elems) * sizeof(bf16), stream),
      "clearing the KV cache");
  for (int64_t l = 0; l < layer_count; ++l) {
    k_cache_.push_back(pool + (2 * l) * blocks * block_elems_);
    v_cache_.push_back(pool + (2 * l + 1) * blocks * block_elems_);
  }
  const int64_t host_blocks = options.swap_space_bytes / capacity_.bytes_per_block;
  capacity_.num_cpu_blocks = static_cast<int32_t>(std::min<int64_t>(host_blocks, 1 << 30));
  if (capacity_.num_cpu_blocks > 0) {
    SERVELAB_RETURN_IF_ERROR(memory_.AllocPinned(
        host_pool_, 2 * layer_count * capacity_.num_cpu_blocks * block_elems_, "the swap space"));
  }
  return Status::Ok();
}

void DeviceKvPool::Copy(std::span<const BlockCopy> copies, bool to_host, int32_t device,
                        cudaStream_t stream) {
  if (copies.empty()) return;
  auto fail = [this, to_host](cudaError_t err) {
    if (err != cudaSuccess && error_.ok()) {
      error_ = CudaError(err, to_host ? "swapping blocks out" : "swapping blocks in");
    }
  };
  fail(cudaSetDevice(device));
  const size_t block_bytes = static_cast<size_t>(block_elems_) * sizeof(bf16);
  const int32_t src_blocks = to_host ? capacity_.num_gpu_blocks : capacity_.num_cpu_blocks;
  const int32_t dst_blocks = to_host ? capacity_.num_cpu_blocks : capacity_.num_gpu_blocks;
  const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  // Each pool is 2 x layers arrays of its block count, back to back (Allocate): a run of
  // consecutive blocks moves for every layer in one 2D copy whose rows are the arrays.
  // Pitches past 2^31 - 1 bytes (the limit of 2D copies) fall back to one copy per array.
  auto* device_base = reinterpret_cast<unsigned char*>(k_cache_.front());
  SERVELAB_CHECK_MSG(host_pool_ != nullptr, "block copies, but the runner has no swap space");
  auto* host_base = reinterpret_cast<unsigned char*>(host_pool_);
  const size_t device_pitch = static_cast<size_t>(capacity_.num_gpu_blocks) * block_bytes;
  const size_t host_pitch = static_cast<size_t>(capacity_.num_cpu_blocks) * block_bytes;
  const size_t src_pitch = to_host ? device_pitch : host_pitch;
  const size_t dst_pitch = to_host ? host_pitch : device_pitch;
  const size_t arrays = 2 * k_cache_.size();
  const bool two_d = std::max(src_pitch, dst_pitch) <= size_t{std::numeric_limits<int32_t>::max()};
  for (size_t i = 0; i < copies.size();) {
    size_t run = 0;
    for (; i + run < copies.size(); ++run) {
      const BlockCopy& c = copies[i + run];
      SERVELAB_CHECK_MSG(c.src >= 0 && c.src < src_blocks && c.dst >= 0 && c.dst < dst_blocks,
                         "block copy " + std::to_string(c.src) + " -> " + std::to_string(c.dst));
      if (run > 0 && (c.src != copies[i].src + static_cast<int32_t>(run) ||
                      c.dst != copies[i].dst + static_cast<int32_t>(run))) {
        break;
      }
    }
    const unsigned char* src = (to_host ? device_base : host_base) + copies[i].src * block_bytes;
    unsigned char* dst = (to_host ? host_base : device_base) + copies[i].dst * block_bytes;
    const size_t width = run * block_bytes;
    if (two_d) {
      fail(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, arrays, kind, stream));
    } else {
      for (size_t a = 0; a < arrays; ++a) {
        fail(cudaMemcpyAsync(dst + a * dst_pitch, src + a * src_pitch, width, kind, stream));
      }
    }
    i += run;
  }
}

}  // namespace servelab::engine_cuda
