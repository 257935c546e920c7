// TopPSample: one thread block per row; the rule is the twin's (../top_p_sample.h), found
// without a sort by searching the logit-key space with block reductions, several passes over
// the row (it stays in L2: 256 KiB of bf16 at V = 128256).
//
//   pass 1    min and max logit keys (the max gives the softmax shift);
//   top-k     the largest key lambda with count(key >= lambda) >= top_k: the top_k-th largest
//             logit exactly. Each pass counts at 15 evenly spaced pivots of the remaining key
//             interval at once and keeps the sixteenth holding the answer, so 32-bit keys take
//             at most 8 passes (no exp: counting only compares keys);
//   top-p     M_k in one pass, then the same search on mass(key >= lambda) >= target within
//             [lambda_k, max key]: the keys below the lowest pivot are skipped before their
//             weight is computed, so later passes do little exp work;
//   draw      each warp sums the kept weights of one contiguous id segment; the segment
//             holding the draw point is walked 32 ids at a time with a warp prefix sum.
// Masses are exact uint64 sums of the same integer weights as the twin, so the reduction
// order does not matter and the result is the twin's token, bit for bit.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/top_p_sample.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kPivots = 15;  // a search pass splits the interval 16 ways

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const bf16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ uint64_t WarpSum(uint64_t x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(detail::kFullMask, x, o);
  return x;
}

// Sums every thread's acc[j] over the block, for each j; every thread gets the sums. Contains
// __syncthreads: call from every thread.
template <int N>
__device__ __forceinline__ void BlockSum(uint64_t (&acc)[N], uint64_t (*scratch)[kPivots]) {
  static_assert(N <= kPivots);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    acc[j] = WarpSum(acc[j]);
    if (lane == 0) scratch[warp][j] = acc[j];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    acc[j] = 0;
    for (int w = 0; w < kWarps; ++w) acc[j] += scratch[w][j];
  }
  __syncthreads();  // scratch reusable after return
}

// The row's softmax shift and temperature, for TopPWeight.
struct RowScale {
  float max_logit;
  float temperature;
};

// The largest key lambda in [lo, hi] with F(lambda) >= target, where F(lambda) sums over the
// tokens with key >= lambda their count (kMass false: top-k) or weight (true: top-p), so F is
// non-increasing in lambda and the answer is a key of the row.
// REQUIRES: F(lo) >= target. Block-uniform arguments; contains __syncthreads.
template <bool kMass, typename T>
__device__ uint32_t LargestKeyReaching(const T* __restrict__ row, int32_t vocab, RowScale scale,
                                       uint32_t lo, uint32_t hi, uint64_t target,
                                       uint64_t (*scratch)[kPivots]) {
  while (lo < hi) {
    // Pivot(j) = lo + ceil((hi - lo) * j / 16): Pivot(0) = lo, Pivot(16) = hi, and the 15
    // tested, j = 1..15, ascend within (lo, hi]. Recomputed rather than indexed, so the
    // pivots stay in registers.
    const uint64_t span = hi - lo;
    const auto pivot = [&](int j) {
      return lo + static_cast<uint32_t>((span * j + kPivots) / (kPivots + 1));
    };
    uint32_t tested[kPivots];
#pragma unroll
    for (int j = 0; j < kPivots; ++j) tested[j] = pivot(j + 1);
    uint64_t acc[kPivots] = {};
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = Load(row + i);
      const uint32_t key = TopPOrderKey(v);
      if (key < tested[0]) continue;  // counts at no pivot: skip the weight
      const uint64_t w = kMass ? TopPWeight(v, scale.max_logit, scale.temperature) : 1;
#pragma unroll
      for (int j = 0; j < kPivots; ++j) acc[j] += key >= tested[j] ? w : 0;
    }
    BlockSum(acc, scratch);
    // F is non-increasing and the pivots ascend, so the pivots reaching the target are a
    // prefix; the answer lies from the last of them to just below the first that does not.
    int reached = 0;
#pragma unroll
    for (int j = 0; j < kPivots; ++j) reached += acc[j] >= target ? 1 : 0;
    const uint32_t next_lo = pivot(reached);
    if (reached < kPivots) hi = pivot(reached + 1) - 1;
    lo = next_lo;
  }
  return lo;
}

// Sum of the weights of the tokens with key >= lambda.
template <typename T>
__device__ uint64_t PrefixMass(const T* __restrict__ row, int32_t vocab, RowScale scale,
                               uint32_t lambda, uint64_t (*scratch)[kPivots]) {
  uint64_t acc[1] = {0};
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = Load(row + i);
    if (TopPOrderKey(v) >= lambda) acc[0] += TopPWeight(v, scale.max_logit, scale.temperature);
  }
  BlockSum(acc, scratch);
  return acc[0];
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    TopPSampleKernel(int32_t* __restrict__ token_ids, const T* __restrict__ logits,
                     const float* __restrict__ temperatures, const int32_t* __restrict__ top_ks,
                     const float* __restrict__ top_ps, const double* __restrict__ uniforms,
                     int32_t vocab) {
  __shared__ uint64_t scratch[kWarps][kPivots];
  __shared__ uint32_t warp_keys[2][kWarps];
  __shared__ uint64_t segment_mass[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* __restrict__ row = logits + int64_t{blockIdx.x} * vocab;
  const float temperature = temperatures[blockIdx.x], top_p = top_ps[blockIdx.x];
  const int32_t top_k = top_ks[blockIdx.x];
  const double u = uniforms[blockIdx.x];
  // The twin's CHECKs; a bad row is an engine bug.
  if (!(temperature > 0.0f && temperature <= FLT_MAX) || !(top_p > 0.0f && top_p <= 1.0f) ||
      top_k < 0 || !(u >= 0.0 && u < 1.0)) {
    __trap();
  }

  // Pass 1: key range of the row.
  uint32_t min_key = UINT32_MAX, max_key = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const uint32_t key = TopPOrderKey(Load(row + i));
    min_key = min(min_key, key);
    max_key = max(max_key, key);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    min_key = min(min_key, __shfl_xor_sync(detail::kFullMask, min_key, o));
    max_key = max(max_key, __shfl_xor_sync(detail::kFullMask, max_key, o));
  }
  if (lane == 0) {
    warp_keys[0][warp] = min_key;
    warp_keys[1][warp] = max_key;
  }
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    min_key = min(min_key, warp_keys[0][w]);
    max_key = max(max_key, warp_keys[1][w]);
  }
  // Invert the key (its sign bit set means a non-negative logit).
  const float max_logit =
      __uint_as_float((max_key & 0x80000000u) != 0 ? max_key & 0x7fffffffu : ~max_key);
  if (!isfinite(max_logit) || min_key < TopPOrderKey(-INFINITY)) __trap();  // a NaN or no finite
  const RowScale scale{max_logit, temperature};

  uint32_t lambda = min_key;
  if (top_k > 0 && top_k < vocab) {
    lambda = LargestKeyReaching<false>(row, vocab, scale, min_key, max_key,
                                       static_cast<uint64_t>(top_k), scratch);
  }
  if (top_p < 1.0f) {
    const uint64_t target = TopPTargetMass(top_p, PrefixMass(row, vocab, scale, lambda, scratch));
    lambda = LargestKeyReaching<true>(row, vocab, scale, lambda, max_key, target, scratch);
  }

  // Draw: warp w owns ids [w * segment, (w + 1) * segment), whole 32-id steps.
  const int32_t segment = ((vocab + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int32_t begin = warp * segment, end = min(vocab, begin + segment);
  uint64_t mass = 0;
  for (int32_t i = begin + lane; i < end; i += 32) {
    const float v = Load(row + i);
    if (TopPOrderKey(v) >= lambda) mass += TopPWeight(v, scale.max_logit, scale.temperature);
  }
  mass = WarpSum(mass);
  if (lane == 0) segment_mass[warp] = mass;
  __syncthreads();
  uint64_t total = 0;
  for (int w = 0; w < kWarps; ++w) total += segment_mass[w];
  const uint64_t draw = TopPDrawPoint(u, total);  // total >= 2^40: the max logit is kept
  // The segment whose mass interval [before, before + mass) holds the draw point; exact
  // integers, so exactly one warp finds it and its walk below ends inside the segment.
  uint64_t before = 0;
  for (int w = 0; w < warp; ++w) before += segment_mass[w];
  if (!(before <= draw && draw < before + segment_mass[warp])) return;
  for (int32_t base = begin; base < end; base += 32) {
    const int32_t i = base + lane;
    uint64_t running = 0;
    if (i < end) {
      const float v = Load(row + i);
      if (TopPOrderKey(v) >= lambda) running = TopPWeight(v, scale.max_logit, scale.temperature);
    }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // inclusive prefix sum over the 32 lanes
      const uint64_t left = __shfl_up_sync(detail::kFullMask, running, o);
      if (lane >= o) running += left;
    }
    const unsigned past = __ballot_sync(detail::kFullMask, before + running > draw);
    if (past != 0) {
      if (lane == 0) token_ids[blockIdx.x] = base + __ffs(past) - 1;
      return;
    }
    before += __shfl_sync(detail::kFullMask, running, 31);
  }
}

template <typename T>
void Launch(int32_t* token_ids, const T* logits, const float* temperatures, const int32_t* top_ks,
            const float* top_ps, const double* uniforms, int32_t num_rows, int32_t vocab_size,
            cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_rows >= 0 && vocab_size > 0 && vocab_size <= kTopPMaxVocab);
  if (num_rows == 0) return;
  TopPSampleKernel<T><<<num_rows, kThreads, 0, stream>>>(token_ids, logits, temperatures, top_ks,
                                                         top_ps, uniforms, vocab_size);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace

void TopPSample(int32_t* token_ids, const bf16* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size, cudaStream_t stream) {
  Launch(token_ids, logits, temperatures, top_ks, top_ps, uniforms, num_rows, vocab_size, stream);
}

void TopPSample(int32_t* token_ids, const float* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size, cudaStream_t stream) {
  Launch(token_ids, logits, temperatures, top_ks, top_ps, uniforms, num_rows, vocab_size, stream);
}

}  // namespace servelab::kernels::cuda
