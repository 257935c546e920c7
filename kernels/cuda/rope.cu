// ApplyRope: one thread block per token. The token's cos/sin for each of the head_dim/2
// frequencies are computed once (f64 angle, as the CPU twin) into shared memory, then every
// (head, pair) of q and k is rotated by one thread.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void ApplyRopeKernel(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq,
                                int32_t num_heads, int32_t num_kv_heads, int32_t head_dim) {
  extern __shared__ float cos_sin[];  // [2, half]
  const int32_t half = head_dim / 2;
  const int64_t t = blockIdx.x;
  const int32_t pos = positions[t];
  if (pos < 0) __trap();
  float* cos_v = cos_sin;
  float* sin_v = cos_sin + half;
  detail::RopeCosSin(pos, inv_freq, half, cos_v, sin_v);
  __syncthreads();
  const int32_t q_pairs = num_heads * half;
  const int32_t all_pairs = (num_heads + num_kv_heads) * half;
  for (int32_t p = threadIdx.x; p < all_pairs; p += blockDim.x) {
    bf16* head;
    int32_t i;
    if (p < q_pairs) {
      head = q + (t * num_heads + p / half) * head_dim;
      i = p % half;
    } else {
      head = k + (t * num_kv_heads + (p - q_pairs) / half) * head_dim;
      i = (p - q_pairs) % half;
    }
    detail::RopeRotate(__bfloat162float(head[i]), __bfloat162float(head[i + half]), cos_v[i],
                       sin_v[i], &head[i], &head[i + half]);
  }
}

}  // namespace

void ApplyRope(bf16* q, bf16* k, const int32_t* positions, const float* inv_freq,
               int32_t num_tokens, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
               cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && num_heads > 0 && num_kv_heads > 0);
  SERVELAB_KERNEL_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 4096);
  if (num_tokens == 0) return;
  const size_t smem = sizeof(float) * head_dim;  // cos and sin, half each
  ApplyRopeKernel<<<num_tokens, kThreads, smem, stream>>>(q, k, positions, inv_freq, num_heads,
                                                          num_kv_heads, head_dim);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::kernels::cuda
