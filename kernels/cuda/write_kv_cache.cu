// WriteKvCache: one thread block per token; 16-byte copies of its K and V rows.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

using detail::Bf16x8;

// stride8: 16-byte units per token row (num_kv_heads * head_dim / 8).
__global__ void WriteKvCacheKernel(Bf16x8* k_cache, Bf16x8* v_cache, const Bf16x8* k,
                                   const Bf16x8* v, const int64_t* slot_mapping, int64_t stride8,
                                   int64_t num_slots) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;  // padding
  if (slot >= num_slots) __trap();
  for (int64_t i = threadIdx.x; i < stride8; i += blockDim.x) {
    k_cache[slot * stride8 + i] = k[t * stride8 + i];
    v_cache[slot * stride8 + i] = v[t * stride8 + i];
  }
}

}  // namespace

void WriteKvCache(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v,
                  const int64_t* slot_mapping, int32_t num_tokens, const KvCacheShape& cache,
                  cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(cache.Valid());
  SERVELAB_KERNEL_CHECK(num_tokens >= 0);
  SERVELAB_KERNEL_CHECK_MSG(cache.head_dim % 8 == 0, "head_dim %d", cache.head_dim);
  if (num_tokens == 0) return;
  const int64_t stride8 = cache.SlotStride() / 8;
  const int threads = stride8 >= 256 ? 256 : static_cast<int>((stride8 + 31) / 32 * 32);
  WriteKvCacheKernel<<<num_tokens, threads, 0, stream>>>(
      reinterpret_cast<Bf16x8*>(k_cache), reinterpret_cast<Bf16x8*>(v_cache),
      reinterpret_cast<const Bf16x8*>(k), reinterpret_cast<const Bf16x8*>(v), slot_mapping,
      stride8, cache.NumSlots());
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::kernels::cuda
