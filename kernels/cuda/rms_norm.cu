// RmsNorm and FusedAddRmsNorm: one thread block per token; each thread keeps its strided
// elements of the row between the f32 sum-of-squares pass and the write, so `out` may alias x.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RmsNormKernel(bf16* out, const bf16* x, const bf16* weight, int32_t hidden,
                              float eps) {
  __shared__ float scratch[32];
  const bf16* row = x + int64_t{blockIdx.x} * hidden;
  float sum_sq = 0.0f;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(detail::BlockSum(sum_sq, scratch) / hidden + eps);
  bf16* out_row = out + int64_t{blockIdx.x} * hidden;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);  // read before this thread's own write
    out_row[i] = __float2bfloat16(v * inv_rms * __bfloat162float(weight[i]));
  }
}

__global__ void FusedAddRmsNormKernel(bf16* x, bf16* residual, const bf16* weight, int32_t hidden,
                                      float eps) {
  __shared__ float scratch[32];
  bf16* x_row = x + int64_t{blockIdx.x} * hidden;
  bf16* res_row = residual + int64_t{blockIdx.x} * hidden;
  float sum_sq = 0.0f;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const bf16 r = __float2bfloat16(__bfloat162float(res_row[i]) + __bfloat162float(x_row[i]));
    res_row[i] = r;
    const float v = __bfloat162float(r);
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(detail::BlockSum(sum_sq, scratch) / hidden + eps);
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(res_row[i]);  // this thread's own store above
    x_row[i] = __float2bfloat16(v * inv_rms * __bfloat162float(weight[i]));
  }
}

}  // namespace

void RmsNorm(bf16* out, const bf16* x, const bf16* weight, int32_t num_tokens, int32_t hidden,
             float eps, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && hidden > 0);
  if (num_tokens == 0) return;
  RmsNormKernel<<<num_tokens, kThreads, 0, stream>>>(out, x, weight, hidden, eps);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

void FusedAddRmsNorm(bf16* x, bf16* residual, const bf16* weight, int32_t num_tokens,
                     int32_t hidden, float eps, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && hidden > 0);
  if (num_tokens == 0) return;
  FusedAddRmsNormKernel<<<num_tokens, kThreads, 0, stream>>>(x, residual, weight, hidden, eps);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::kernels::cuda
