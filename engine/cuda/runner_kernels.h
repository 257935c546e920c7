#pragma once
// Small device kernels the CUDA runner needs beyond kernels/cuda/ (which hold the twins of
// the CPU kernels): seeded random weights generated in place, bias add, row gather, and
// the fused split of a q|k|v projection with RoPE and the KV write.
// Launches are asynchronous on `stream`; zero-sized work launches nothing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kv_cache_shape.h"

namespace servelab::engine_cuda {

using bf16 = __nv_bfloat16;

// out[i] = mean + stddev * z_i, z_i a bell: the centred sum of four uniforms scaled to unit
// variance (bounded by +-2 sqrt(3)), the shape random_model.h's weights have.
// Each z_i is a function of (seed, tensor, i) alone — a counter-based hash — so the values
// do not depend on the launch shape, and a tensor's values depend only on its index.
void FillRandomBf16(bf16* out, int64_t n, uint64_t seed, uint64_t tensor, float mean,
                    float stddev, cudaStream_t stream);

// x[r, c] += bias[c] for r < rows (rounded to bf16 once).
void AddBias(bf16* x, const bf16* bias, int32_t rows, int32_t cols, cudaStream_t stream);

// out[e, :] = in[rows[e], :], e < num_rows; rows is device memory.
void GatherRows(bf16* out, const bf16* in, const int32_t* rows, int32_t num_rows, int32_t cols,
                cudaStream_t stream);

// After one fused q|k|v GEMM: per token t, qkv[t] = [q (num_heads x head_dim) | k
// (num_kv_heads x head_dim) | v (num_kv_heads x head_dim)]. Writes q rotated by RoPE to
// q_out [num_tokens, num_heads, head_dim], and k rotated and v as they are into the paged
// cache at slot_mapping[t] (negative: padding, nothing written). Bit for bit what
// kernels::cuda::ApplyRope on split q and k, then WriteKvCache, produce (the same f64 angles,
// the same f32 products, one bf16 rounding), in one launch instead of three GEMM outputs and
// two kernels. Traps on a negative position or a slot past the cache.
void QkvRopeKvWrite(bf16* q_out, bf16* k_cache, bf16* v_cache, const bf16* qkv,
                    const int32_t* positions, const float* inv_freq, const int64_t* slot_mapping,
                    int32_t num_tokens, int32_t num_heads, const kernels::KvCacheShape& cache,
                    cudaStream_t stream);

}  // namespace servelab::engine_cuda
