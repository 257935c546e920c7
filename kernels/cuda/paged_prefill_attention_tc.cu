// PagedPrefillAttention on tensor cores (head_dim 64 and 128): FlashAttention-2 style tiles
// over the paged KV cache, bf16 MMA with f32 accumulation through the WMMA API (16x16x16).
//
// Launch: grid (num_kv_heads, num_seqs, query tiles), 128 threads (4 warps). A block takes
// kRows = 64 query rows of one sequence's chunk and one GQA group, row = (query token, head
// of the group), rows ordered token-major (row r = token r / group, head r % group), so each
// K/V tile the block loads serves every head of the group. Warp w owns rows 16w..16w+15:
// their Q fragments stay in registers for the whole kernel, and so does their output
// accumulator O (16 x head_dim, f32). The block walks the K/V positions 0..(its last row's
// position) in tiles of kTile = 64; per tile each warp
//   1. S = Q K^T (16 x 64, f32) on tensor cores, stored to the warp's shared scratch;
//   2. folds S into the online softmax of its 16 rows on CUDA cores, two lanes per row:
//      s * scale (in log2 units), positions after the row's own masked (causal: query token
//      i of the chunk sits at position context_len - query_len + i), running max m and sum l
//      in f32; P = exp2(s - m_new) rounded to bf16 into shared memory, and the factor
//      exp2(m_old - m_new) per row;
//   3. rescales O by that factor per row and adds P V (P bf16, V bf16, f32 accumulation).
// At the end O is divided by l per row and written as bf16.
//
// Precision: P is rounded to bf16 before P V, as FlashAttention does (the tensor cores take
// bf16 operands): each weight carries a relative error of up to 2^-8 (bf16 keeps 8
// significant bits). l sums the rounded weights, so the weights P V applies are exactly
// normalised; what remains moves an output by sum_j w_j e_j (v_j - out), |e_j| <= 2^-8 and
// random in sign: typically ~0.1% and well under 1% of the row's magnitude. With the bf16
// rounding of the output itself (2^-8 of the element) the tests' 2e-2 of the row's
// magnitude holds with room. Q K^T, m, l and O are f32 (exact products of bf16 inputs).
//
// Accumulator layout: WMMA leaves which (row, column) each element of a fragment holds
// unspecified, but it is one fixed map per fragment type (store_matrix_sync inverts
// load_matrix_sync, and mma_sync's result is defined through them). The kernel learns the row
// of each element once, by loading a 16x16 matrix whose entries are their row indices into an
// accumulator fragment; O is rescaled per row through that map. Nothing else depends on the
// layout: S and the output go through shared memory with store_matrix_sync.
//
// Memory: K and V tiles are gathered from the paged cache (block_tables) into shared memory
// with 16-byte cp.async; positions past the block's last row are zero-filled (a masked weight
// is 0, and 0 * V must not meet uninitialised cache). Pipelining (one buffer each, four
// barriers per tile): V(t) streams in while S(t) and the softmax run, K(t + 1) while P V(t)
// runs. Shared memory, head_dim 128 / 64: Q staging (reused for the S and P scratch once Q
// sits in registers) 27 KiB, K and V tiles 2 x 17 / 2 x 9 KiB, row factors and the row-id
// matrix 1.25 KiB: 62.25 / 46.25 KiB per block. Rows are padded by 16 bytes (bf16) or 32
// bytes (f32) against bank conflicts.
//
// Rows with nothing visible yet cannot occur for a real row (every row sees position 0, in
// the first tile), but rows past the block's last token and whole warps without rows are
// handled without NaN anyway: they mask everything, keep O = 0 and are never written. Query
// tiles run latest-first (blockIdx.z reversed): the blocks with the most K/V start first.
#include <mma.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/paged_prefill_attention.cuh"

namespace servelab::kernels::cuda::detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kFrag = 16;                  // WMMA tile edge: m = n = k = 16
constexpr int kRows = kWarps * kFrag;      // query rows per block, 16 per warp
constexpr int kTile = 64;                  // K/V positions per tile
static_assert(kTile == kPrefillKvTile);    // kernels/prefill_grid.h: the cost model's count
constexpr int kScoreStride = kTile + 8;    // f32 row of the S / output scratch (+32 bytes)
constexpr int kProbStride = kTile + 8;     // bf16 row of the P scratch (+16 bytes)
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMinBlocksPerSm = 3;        // what shared memory allows at head_dim 128 (62 KiB)
static_assert(kRows == kPrefillRowsPerBlock);

using AccFrag = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;
using RowMajorA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major>;
using ColMajorB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::col_major>;
using RowMajorB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::row_major>;
constexpr int kAccElems = AccFrag::num_elements;

// Shared memory of one block, byte offsets; every region 128-byte aligned (WMMA needs 32).
template <int kHeadDim>
struct Smem {
  static constexpr int kStride = kHeadDim + 8;  // bf16 row of Q / K / V (+16 bytes)
  static constexpr size_t kQBytes = size_t{kRows} * kStride * sizeof(bf16);
  static constexpr size_t kScoreBytes = size_t{kRows} * kScoreStride * sizeof(float);
  static constexpr size_t kProbBytes = size_t{kRows} * kProbStride * sizeof(bf16);
  static constexpr size_t kTileBytes = size_t{kTile} * kStride * sizeof(bf16);
  // Region A: Q staging, then (after a barrier) the per-warp S and P scratch.
  static constexpr size_t kScores = 0;  // [warps][16, kScoreStride] f32
  static constexpr size_t kProbs = kScoreBytes;  // [warps][16, kProbStride] bf16
  static constexpr size_t kRegionA =
      kQBytes > kScoreBytes + kProbBytes ? kQBytes : kScoreBytes + kProbBytes;
  static constexpr size_t kK = kRegionA;                          // [kTile, kStride] bf16
  static constexpr size_t kV = kK + kTileBytes;                   // [kTile, kStride] bf16
  static constexpr size_t kRowFactor = kV + kTileBytes;           // [warps][16] f32
  static constexpr size_t kRowIds = kRowFactor + kRows * sizeof(float);  // [16, 16] f32
  static constexpr size_t kBytes = kRowIds + kFrag * kFrag * sizeof(float);
  static_assert(kProbs % 128 == 0 && kK % 128 == 0 && kV % 128 == 0 && kRowFactor % 128 == 0 &&
                kRowIds % 128 == 0);
  static_assert(kStride % 8 == 0 && kScoreStride % 4 == 0 && kProbStride % 8 == 0);  // WMMA ldm
};

__device__ __forceinline__ void CpAsync16(void* smem_dst, const void* global_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most one of this thread's committed groups is still in flight.
__device__ __forceinline__ void CpAsyncWaitAllButLast() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// Gathers positions [tile_start, tile_start + kTile) of kv head `kv_head` from a paged cache
// into dst [kTile, kStride] with cp.async (this thread's share; completion is the caller's
// wait + barrier). Positions past last_pos are zero-filled with plain stores.
template <int kHeadDim>
__device__ __forceinline__ void LoadKvTile(bf16* dst, const bf16* cache,
                                           const int32_t* block_table, int32_t block_size,
                                           int32_t num_blocks, int32_t num_kv_heads,
                                           int32_t kv_head, int32_t tile_start, int32_t last_pos) {
  constexpr int kStride = Smem<kHeadDim>::kStride;
  constexpr int kUnits = kHeadDim / 8;  // 16-byte units per row
  static_assert(kTile * kUnits % kThreads == 0);
#pragma unroll
  for (int it = 0; it < kTile * kUnits / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads;
    const int j = i / kUnits, u = i % kUnits;
    const int32_t pos = tile_start + j;
    bf16* d = dst + j * kStride + u * 8;
    if (pos <= last_pos) {
      const int32_t block = block_table[pos / block_size];
      if (block < 0 || block >= num_blocks) __trap();
      const int64_t row = (int64_t{block} * block_size + pos % block_size) * num_kv_heads + kv_head;
      CpAsync16(d, cache + row * kHeadDim + u * 8);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) PagedPrefillTcKernel(PrefillParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 WMMA needs sm_80; the build targets sm_90
#else
  using L = Smem<kHeadDim>;
  constexpr int kStride = L::kStride;
  constexpr int kUnits = kHeadDim / 8;
  constexpr int kDimFrags = kHeadDim / kFrag;  // O fragments per warp, Q fragments per row block
  constexpr int kTileFrags = kTile / kFrag;    // 4
  static_assert(kHeadDim % kTile == 0);
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);  // [kRows, kStride], until Q is in registers
  bf16* k_s = reinterpret_cast<bf16*>(smem + L::kK);
  bf16* v_s = reinterpret_cast<bf16*>(smem + L::kV);
  float* row_ids_s = reinterpret_cast<float*>(smem + L::kRowIds);

  const int32_t kv_head = blockIdx.x, seq = blockIdx.y;
  const int32_t start = p.query_start_loc[seq];
  const int32_t query_len = p.query_start_loc[seq + 1] - start;
  const int32_t context_len = p.context_lens[seq];
  if (query_len < 0 || query_len > p.max_query_len || context_len < query_len ||
      context_len > p.max_context_len) {
    __trap();
  }
  const int32_t query_tile = gridDim.z - 1 - blockIdx.z;  // latest (longest) tiles first
  const int32_t first_token = query_tile * p.tokens_per_block;  // within the chunk
  if (first_token >= query_len) return;  // block-uniform, before any barrier
  const int32_t num_tokens = min(p.tokens_per_block, query_len - first_token);
  const int32_t num_rows = num_tokens * p.group;
  const int32_t first_pos = context_len - query_len + first_token;  // of the block's token 0
  const int32_t last_pos = first_pos + num_tokens - 1;              // of its last token
  const int32_t num_tiles = static_cast<int32_t>(  // as the cost model counts them
      PrefillBlockKvTiles(context_len - query_len, query_len, query_tile, p.tokens_per_block, kTile));
  const int32_t* block_table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  const int32_t block_size = p.block_size, num_blocks = p.num_blocks;
  const int32_t num_kv_heads = p.num_kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Stage Q (zeros past the last row) and the row-id matrix; start K(0).
  static_assert(kRows * kUnits % kThreads == 0);
#pragma unroll
  for (int it = 0; it < kRows * kUnits / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads;
    const int r = i / kUnits, u = i % kUnits;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r < num_rows) {
      const int64_t token = start + first_token + r / p.group;
      const int32_t head = kv_head * p.group + r % p.group;
      v = reinterpret_cast<const uint4*>(p.q + (token * p.num_heads + head) * kHeadDim)[u];
    }
    *reinterpret_cast<uint4*>(q_s + r * kStride + u * 8) = v;
  }
  for (int i = threadIdx.x; i < kFrag * kFrag; i += kThreads) row_ids_s[i] = float(i / kFrag);
  LoadKvTile<kHeadDim>(k_s, p.k_cache, block_table, block_size, num_blocks, num_kv_heads, kv_head,
                       0, last_pos);
  CpAsyncCommit();
  __syncthreads();  // Q and the row ids staged

  RowMajorA q_frag[kDimFrags];
#pragma unroll
  for (int k = 0; k < kDimFrags; ++k) {
    wmma::load_matrix_sync(q_frag[k], q_s + warp * kFrag * kStride + k * kFrag, kStride);
  }
  int acc_row[kAccElems];  // row (0..15) of each accumulator element
  {
    AccFrag ids;
    wmma::load_matrix_sync(ids, row_ids_s, kFrag, wmma::mem_row_major);
#pragma unroll
    for (int e = 0; e < kAccElems; ++e) acc_row[e] = static_cast<int>(ids.x[e]);
  }
  AccFrag o_frag[kDimFrags];
#pragma unroll
  for (int d = 0; d < kDimFrags; ++d) wmma::fill_fragment(o_frag[d], 0.0f);
  __syncthreads();  // every warp holds its Q: region A becomes the S / P scratch

  float* score_w = reinterpret_cast<float*>(smem + L::kScores) + warp * kFrag * kScoreStride;
  bf16* prob_w = reinterpret_cast<bf16*>(smem + L::kProbs) + warp * kFrag * kProbStride;
  float* factor_w = reinterpret_cast<float*>(smem + L::kRowFactor) + warp * kFrag;

  // Warp-uniform: does this warp own any row, and the position of its last one.
  const bool warp_has_rows = warp * kFrag < num_rows;
  const int32_t warp_last_pos = first_pos + (min(warp * kFrag + kFrag, num_rows) - 1) / p.group;
  // The softmax lane pair of row my_row: lane 2r + h folds columns [8j + 4h, 8j + 4h + 4), j < 8.
  const int my_row = lane / 2, my_half = lane % 2;
  const int block_row = warp * kFrag + my_row;
  const int32_t my_pos = block_row < num_rows ? first_pos + block_row / p.group : -1;  // -1: none
  const float scale_log2 = p.scale * kLog2e;
  float run_max = -INFINITY;  // of scale * s, log2 units
  float run_sum = 0.0f;       // of the bf16-rounded weights

  for (int32_t t = 0; t < num_tiles; ++t) {
    const int32_t tile_start = t * kTile;
    // V(t) into its buffer (free: the previous P V finished before the loop's last barrier).
    LoadKvTile<kHeadDim>(v_s, p.v_cache, block_table, block_size, num_blocks, num_kv_heads,
                         kv_head, tile_start, last_pos);
    CpAsyncCommit();
    CpAsyncWaitAllButLast();  // this thread's K(t) landed (only V(t) may be in flight)
    __syncthreads();          // everyone's K(t) landed
    const bool active = warp_has_rows && tile_start <= warp_last_pos;  // warp-uniform

    if (active) {
      // 1. S = Q K^T: K^T is K's [kTile, kStride] tile read as a column-major B.
#pragma unroll
      for (int n = 0; n < kTileFrags; ++n) {
        AccFrag s_frag;
        wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
        for (int k = 0; k < kDimFrags; ++k) {
          ColMajorB k_frag;
          wmma::load_matrix_sync(k_frag, k_s + n * kFrag * kStride + k * kFrag, kStride);
          wmma::mma_sync(s_frag, q_frag[k], k_frag, s_frag);
        }
        wmma::store_matrix_sync(score_w + n * kFrag, s_frag, kScoreStride, wmma::mem_row_major);
      }
      __syncwarp();

      // 2. Online softmax of row my_row: this lane's 32 columns, then its pair's. Two passes
      // over the scores in shared memory (max, then weights) rather than 32 more registers.
      const float* s_row = score_w + my_row * kScoreStride;
      const int32_t visible_cols = my_pos - tile_start + 1;  // columns c < this are visible
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j) {
        const int c = 8 * j + 4 * my_half;
        const float4 s4 = *reinterpret_cast<const float4*>(s_row + c);
        tile_max = fmaxf(tile_max, c + 0 < visible_cols ? s4.x * scale_log2 : -INFINITY);
        tile_max = fmaxf(tile_max, c + 1 < visible_cols ? s4.y * scale_log2 : -INFINITY);
        tile_max = fmaxf(tile_max, c + 2 < visible_cols ? s4.z * scale_log2 : -INFINITY);
        tile_max = fmaxf(tile_max, c + 3 < visible_cols ? s4.w * scale_log2 : -INFINITY);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
      const float new_max = fmaxf(run_max, tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing visible yet: weights 0
      const float factor = exp2f(run_max - base);                 // 0 while run_max is -inf
      bf16* p_row = prob_w + my_row * kProbStride;
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j) {
        const int c = 8 * j + 4 * my_half;
        const float4 s4 = *reinterpret_cast<const float4*>(s_row + c);
        const float w0 = c + 0 < visible_cols ? exp2f(s4.x * scale_log2 - base) : 0.0f;
        const float w1 = c + 1 < visible_cols ? exp2f(s4.y * scale_log2 - base) : 0.0f;
        const float w2 = c + 2 < visible_cols ? exp2f(s4.z * scale_log2 - base) : 0.0f;
        const float w3 = c + 3 < visible_cols ? exp2f(s4.w * scale_log2 - base) : 0.0f;
        // bf16 P for the tensor cores (FlashAttention's rounding); the sum takes the rounded
        // values, so P V's weights are exactly normalised by run_sum.
        const __nv_bfloat162 lo = __floats2bfloat162_rn(w0, w1);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(w2, w3);
        const float2 lo_f = __bfloat1622float2(lo), hi_f = __bfloat1622float2(hi);
        tile_sum += (lo_f.x + lo_f.y) + (hi_f.x + hi_f.y);
        __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(p_row + c);
        dst[0] = lo;
        dst[1] = hi;
      }
      tile_sum += __shfl_xor_sync(kFullMask, tile_sum, 1);
      run_sum = run_sum * factor + tile_sum;
      run_max = new_max;
      if (my_half == 0) factor_w[my_row] = factor;
      __syncwarp();

      // 3a. O *= factor, row by row.
      float row_factor[kAccElems];
#pragma unroll
      for (int e = 0; e < kAccElems; ++e) row_factor[e] = factor_w[acc_row[e]];
#pragma unroll
      for (int d = 0; d < kDimFrags; ++d) {
#pragma unroll
        for (int e = 0; e < kAccElems; ++e) o_frag[d].x[e] *= row_factor[e];
      }
    }
    __syncthreads();  // every warp is done with K(t)
    if (t + 1 < num_tiles) {
      LoadKvTile<kHeadDim>(k_s, p.k_cache, block_table, block_size, num_blocks, num_kv_heads,
                           kv_head, tile_start + kTile, last_pos);
    }
    CpAsyncCommit();          // possibly empty: keeps the group count uniform
    CpAsyncWaitAllButLast();  // this thread's V(t) landed (only K(t + 1) may be in flight)
    __syncthreads();          // everyone's V(t) landed

    if (active) {
      // 3b. O += P V, one 16-column slice of P at a time.
#pragma unroll
      for (int k = 0; k < kTileFrags; ++k) {
        RowMajorA p_frag;
        wmma::load_matrix_sync(p_frag, prob_w + k * kFrag, kProbStride);
#pragma unroll
        for (int d = 0; d < kDimFrags; ++d) {
          RowMajorB v_frag;
          wmma::load_matrix_sync(v_frag, v_s + k * kFrag * kStride + d * kFrag, kStride);
          wmma::mma_sync(o_frag[d], p_frag, v_frag, o_frag[d]);
        }
      }
    }
    __syncthreads();  // every warp is done with V(t)
  }

  if (!warp_has_rows) return;  // no barrier follows
  // O /= l per row, then out through the warp's score scratch, kTile columns at a time.
  if (my_half == 0) factor_w[my_row] = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
  __syncwarp();
  {
    float inv_sum[kAccElems];
#pragma unroll
    for (int e = 0; e < kAccElems; ++e) inv_sum[e] = factor_w[acc_row[e]];
#pragma unroll
    for (int d = 0; d < kDimFrags; ++d) {
#pragma unroll
      for (int e = 0; e < kAccElems; ++e) o_frag[d].x[e] *= inv_sum[e];
    }
  }
#pragma unroll
  for (int pass = 0; pass < kHeadDim / kTile; ++pass) {
#pragma unroll
    for (int f = 0; f < kTileFrags; ++f) {
      wmma::store_matrix_sync(score_w + f * kFrag, o_frag[pass * kTileFrags + f], kScoreStride,
                              wmma::mem_row_major);
    }
    __syncwarp();
    // 16 rows x 8 units of 8 outputs: 4 per lane.
#pragma unroll
    for (int it = 0; it < kFrag * (kTile / 8) / 32; ++it) {
      const int i = lane + 32 * it;
      const int r = i / (kTile / 8), u = i % (kTile / 8);
      const int row = warp * kFrag + r;
      if (row < num_rows) {
        const int64_t token = start + first_token + row / p.group;
        const int32_t head = kv_head * p.group + row % p.group;
        const float* src = score_w + r * kScoreStride + u * 8;
        const float4 a = *reinterpret_cast<const float4*>(src);
        const float4 b = *reinterpret_cast<const float4*>(src + 4);
        const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        bf16* dst = p.out + (token * p.num_heads + head) * kHeadDim + pass * kTile + u * 8;
        *reinterpret_cast<Bf16x8*>(dst) = FromFloat8(f);
      }
    }
    __syncwarp();  // the scratch is read before the next pass overwrites it
  }
#endif
}

template <int kHeadDim>
void Launch(const PrefillParams& p, int32_t num_seqs, cudaStream_t stream) {
  static_assert(Smem<kHeadDim>::kBytes <= 227 * 1024);
  const auto tiles = static_cast<uint32_t>(PrefillQueryTiles(p.max_query_len, p.tokens_per_block));
  detail::LaunchWithSharedMemory(PagedPrefillTcKernel<kHeadDim>,
                                 dim3(p.num_kv_heads, num_seqs, tiles), kThreads,
                                 Smem<kHeadDim>::kBytes, stream, p);
}

}  // namespace

void LaunchPrefillTensorCores(PrefillParams p, int32_t num_seqs, cudaStream_t stream) {
  p.tokens_per_block = PrefillTokensPerBlock(p.group);
  SERVELAB_KERNEL_CHECK(p.tokens_per_block > 0 &&
                        PrefillQueryTiles(p.max_query_len, p.tokens_per_block) <= 65535);
  switch (p.head_dim) {
    case 64: Launch<64>(p, num_seqs, stream); break;
    case 128: Launch<128>(p, num_seqs, stream); break;
    default: SERVELAB_KERNEL_CHECK_MSG(false, "tensor-core prefill: head_dim %d", p.head_dim);
  }
}

}  // namespace servelab::kernels::cuda::detail
