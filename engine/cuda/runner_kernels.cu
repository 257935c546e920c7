#include "engine/cuda/runner_kernels.h"

#include "kernels/cuda/cuda_check.h"

namespace servelab::engine_cuda {
namespace {

constexpr int kThreads = 256;

__host__ __device__ __forceinline__ uint64_t Mix64(uint64_t z) {
  // SplitMix64's finaliser: a bijection with full avalanche.
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void FillRandomKernel(bf16* out, int64_t n, uint64_t key, float mean, float stddev) {
  // sqrt(3): the sum of four U(0,1) has variance 1/3.
  constexpr float kUnit = 1.7320508075688772f / 65536.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t h = Mix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    // Four 16-bit uniforms from one hash; each in [0, 65536), centred at 32767.5.
    const float sum = static_cast<float>(h & 0xffff) + static_cast<float>((h >> 16) & 0xffff) +
                      static_cast<float>((h >> 32) & 0xffff) + static_cast<float>(h >> 48);
    const float z = (sum - 4.0f * 32767.5f) * kUnit;
    out[i] = __float2bfloat16(fmaf(stddev, z, mean));
  }
}

__global__ void AddBiasKernel(bf16* x, const bf16* bias, int64_t n, int32_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
  }
}

__global__ void GatherRowsKernel(bf16* out, const bf16* in, const int32_t* rows, int32_t cols) {
  const int64_t e = blockIdx.x;
  const int64_t src = rows[e];
  for (int32_t c = threadIdx.x; c < cols; c += blockDim.x) out[e * cols + c] = in[src * cols + c];
}

__global__ void QkvRopeKvWriteKernel(bf16* q_out, bf16* k_cache, bf16* v_cache, const bf16* qkv,
                                     const int32_t* positions, const float* inv_freq,
                                     const int64_t* slot_mapping, int32_t num_heads,
                                     int32_t num_kv_heads, int32_t head_dim, int64_t num_slots) {
  extern __shared__ float cos_sin[];  // [2, half]
  const int32_t half = head_dim / 2;
  const int64_t t = blockIdx.x;
  const int32_t pos = positions[t];
  if (pos < 0) __trap();
  const int64_t slot = slot_mapping[t];
  if (slot >= num_slots) __trap();
  float* cos_v = cos_sin;
  float* sin_v = cos_sin + half;
  kernels::cuda::detail::RopeCosSin(pos, inv_freq, half, cos_v, sin_v);  // as ApplyRope
  __syncthreads();
  const int64_t q_dim = int64_t{num_heads} * head_dim, kv_dim = int64_t{num_kv_heads} * head_dim;
  const bf16* row = qkv + t * (q_dim + 2 * kv_dim);
  const int32_t q_pairs = num_heads * half;
  const int32_t all_pairs = (num_heads + num_kv_heads) * half;
  for (int32_t p = threadIdx.x; p < all_pairs; p += blockDim.x) {
    const bool is_q = p < q_pairs;
    const int32_t head = is_q ? p / half : (p - q_pairs) / half;
    const int32_t i = is_q ? p % half : (p - q_pairs) % half;
    const bf16* in = row + (is_q ? 0 : q_dim) + int64_t{head} * head_dim;
    bf16 y0, y1;
    kernels::cuda::detail::RopeRotate(__bfloat162float(in[i]), __bfloat162float(in[i + half]),
                                      cos_v[i], sin_v[i], &y0, &y1);
    bf16* out;
    if (is_q) {
      out = q_out + t * q_dim + int64_t{head} * head_dim;
    } else if (slot >= 0) {
      out = k_cache + (slot * num_kv_heads + head) * head_dim;
    } else {
      continue;  // padding: no KV
    }
    out[i] = y0;
    out[i + half] = y1;
  }
  if (slot < 0) return;
  const bf16* v = row + q_dim + kv_dim;
  for (int64_t e = threadIdx.x; e < kv_dim; e += blockDim.x) v_cache[slot * kv_dim + e] = v[e];
}

int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride beyond
}

}  // namespace

void FillRandomBf16(bf16* out, int64_t n, uint64_t seed, uint64_t tensor, float mean,
                    float stddev, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(n >= 0);
  if (n == 0) return;
  uint64_t key = seed ^ 0x5E1AB5E1AB5E1ABull;
  key = Mix64(key + tensor * 0xD1B54A32D192ED03ull);
  FillRandomKernel<<<GridFor(n), kThreads, 0, stream>>>(out, n, key, mean, stddev);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

void AddBias(bf16* x, const bf16* bias, int32_t rows, int32_t cols, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(rows >= 0 && cols > 0);
  const int64_t n = int64_t{rows} * cols;
  if (n == 0) return;
  AddBiasKernel<<<GridFor(n), kThreads, 0, stream>>>(x, bias, n, cols);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

void GatherRows(bf16* out, const bf16* in, const int32_t* rows, int32_t num_rows, int32_t cols,
                cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_rows >= 0 && cols > 0);
  if (num_rows == 0) return;
  GatherRowsKernel<<<num_rows, kThreads, 0, stream>>>(out, in, rows, cols);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

void QkvRopeKvWrite(bf16* q_out, bf16* k_cache, bf16* v_cache, const bf16* qkv,
                    const int32_t* positions, const float* inv_freq, const int64_t* slot_mapping,
                    int32_t num_tokens, int32_t num_heads, const kernels::KvCacheShape& cache,
                    cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(cache.Valid() && num_tokens >= 0 && num_heads > 0);
  SERVELAB_KERNEL_CHECK(cache.head_dim % 2 == 0 && cache.head_dim <= 4096);
  if (num_tokens == 0) return;
  const size_t smem = sizeof(float) * cache.head_dim;  // cos and sin, half each
  QkvRopeKvWriteKernel<<<num_tokens, kThreads, smem, stream>>>(
      q_out, k_cache, v_cache, qkv, positions, inv_freq, slot_mapping, num_heads,
      cache.num_kv_heads, cache.head_dim, cache.NumSlots());
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::engine_cuda
