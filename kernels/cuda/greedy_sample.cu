// GreedySample: one thread block per token; each thread scans a strided slice of the row
// keeping (best value, lowest index), then a warp-shuffle and shared-memory reduction.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const bf16* p) { return __bfloat162float(*p); }

// True when (v, i) beats (best, best_i): larger, or equal with a lower index. NaN loses.
__device__ __forceinline__ bool Better(float v, int32_t i, float best, int32_t best_i) {
  return v > best || (v == best && i < best_i);
}

template <typename T>
__global__ void GreedySampleKernel(int32_t* token_ids, const T* logits, int32_t vocab_size) {
  __shared__ float warp_best[32];
  __shared__ int32_t warp_index[32];
  const T* row = logits + int64_t{blockIdx.x} * vocab_size;
  float best = -FLT_MAX;
  int32_t best_i = INT32_MAX;
  for (int32_t i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float v = Load(row + i);
    if (Better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(detail::kFullMask, best, o);
    const int32_t i = __shfl_xor_sync(detail::kFullMask, best_i, o);
    if (Better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_index[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < blockDim.x / 32 ? warp_best[lane] : -FLT_MAX;
    best_i = lane < blockDim.x / 32 ? warp_index[lane] : INT32_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(detail::kFullMask, best, o);
      const int32_t i = __shfl_xor_sync(detail::kFullMask, best_i, o);
      if (Better(v, i, best, best_i)) {
        best = v;
        best_i = i;
      }
    }
    // Every value NaN (or -inf below -FLT_MAX: impossible for finite rows): token 0.
    if (lane == 0) token_ids[blockIdx.x] = best_i == INT32_MAX ? 0 : best_i;
  }
}

template <typename T>
void Launch(int32_t* token_ids, const T* logits, int32_t num_tokens, int32_t vocab_size,
            cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && vocab_size > 0);
  if (num_tokens == 0) return;
  GreedySampleKernel<T><<<num_tokens, kThreads, 0, stream>>>(token_ids, logits, vocab_size);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace

void GreedySample(int32_t* token_ids, const bf16* logits, int32_t num_tokens, int32_t vocab_size,
                  cudaStream_t stream) {
  Launch(token_ids, logits, num_tokens, vocab_size, stream);
}

void GreedySample(int32_t* token_ids, const float* logits, int32_t num_tokens, int32_t vocab_size,
                  cudaStream_t stream) {
  Launch(token_ids, logits, num_tokens, vocab_size, stream);
}

}  // namespace servelab::kernels::cuda
