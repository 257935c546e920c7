// SiluAndMul: grid (tokens, chunks of d); one output element per thread, f32 math.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void SiluAndMulKernel(bf16* out, const bf16* input, int32_t d) {
  const int32_t j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const int64_t t = blockIdx.x;
  const float g = __bfloat162float(input[t * 2 * d + j]);
  const float u = __bfloat162float(input[t * 2 * d + d + j]);
  out[t * d + j] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
}

}  // namespace

void SiluAndMul(bf16* out, const bf16* input, int32_t num_tokens, int32_t d, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && d > 0);
  SERVELAB_KERNEL_CHECK((d + kThreads - 1) / kThreads <= 65535);  // grid.y
  if (num_tokens == 0) return;
  const dim3 grid(num_tokens, (d + kThreads - 1) / kThreads);
  SiluAndMulKernel<<<grid, kThreads, 0, stream>>>(out, input, d);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::kernels::cuda
