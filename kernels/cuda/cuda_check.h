#pragma once
// Internal to kernels/cuda/: launch checking and small device helpers.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/kernel_check.h"

// After a launch: a configuration error (grid, shared memory) is a bug, so abort with its text.
#define SERVELAB_CUDA_LAUNCH_CHECK()                                             \
  do {                                                                           \
    const cudaError_t servelab_err_ = cudaPeekAtLastError();                    \
    SERVELAB_KERNEL_CHECK_MSG(servelab_err_ == cudaSuccess, "%s",                \
                              cudaGetErrorString(servelab_err_));               \
  } while (0)

namespace servelab::kernels::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

// kernel<<<grid, threads, smem, stream>>>(args...), first raising the kernel's dynamic
// shared-memory limit when smem is past the default 48 KiB (an opt-in per kernel).
template <typename... Params, typename... Args>
void LaunchWithSharedMemory(void (*kernel)(Params...), dim3 grid, int threads, size_t smem,
                            cudaStream_t stream, Args&&... args) {
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    SERVELAB_KERNEL_CHECK_MSG(err == cudaSuccess, "%s", cudaGetErrorString(err));
  }
  kernel<<<grid, threads, smem, stream>>>(static_cast<Args&&>(args)...);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}

__device__ __forceinline__ float WarpMax(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, o));
  return x;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 floats; blockDim.x
// a multiple of 32. Contains __syncthreads: call from every thread.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = WarpSum(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  __syncthreads();  // scratch reusable after return
  return total;
}

// RoPE for one token at `pos`: cos_v[i], sin_v[i] of the angle pos * inv_freq[i], i < half,
// the angle and its cos/sin evaluated in f64 like the CPU twin, written by the block's
// threads in turn (the caller synchronizes before reading them).
__device__ __forceinline__ void RopeCosSin(int32_t pos, const float* inv_freq, int32_t half,
                                           float* cos_v, float* sin_v) {
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(static_cast<double>(pos) * static_cast<double>(inv_freq[i]), &s, &c);
    cos_v[i] = static_cast<float>(c);
    sin_v[i] = static_cast<float>(s);
  }
}

// Rotates the pair (x0, x1) of rotate-half RoPE by (c, s): f32 arithmetic, one bf16
// rounding each. Every RoPE kernel goes through it, so they agree bit for bit.
__device__ __forceinline__ void RopeRotate(float x0, float x1, float c, float s, __nv_bfloat16* y0,
                                           __nv_bfloat16* y1) {
  *y0 = __float2bfloat16(x0 * c - x1 * s);
  *y1 = __float2bfloat16(x1 * c + x0 * s);
}

// 8 bf16 = 16 bytes, the unit of vector loads and stores.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

__device__ __forceinline__ void ToFloat8(const Bf16x8& v, float* f) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(v.h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ Bf16x8 FromFloat8(const float* f) {
  Bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

}  // namespace servelab::kernels::cuda::detail
