// PagedPrefillAttention: the entry, its dispatch, and the CUDA-core kernel (the path for
// head_dim 256; the tensor-core kernel for 64 and 128 is paged_prefill_attention_tc.cu).
//
// CUDA-core kernel. Launch: grid (num_kv_heads, num_seqs, query tiles), 256 threads (8
// warps). A block takes up to kRows query rows of one sequence's chunk and one GQA group,
// row = (query token, head of the group), so every head of the group shares each K/V tile it
// loads. K/V tiles of 32 positions are staged through shared memory (rows padded by one
// word: conflict-free column reads). Each warp owns kRowsPerWarp rows: lane j scores
// position j of the tile for one row, the warp folds the tile into that row's running
// softmax (max, sum), and each lane accumulates head_dim / 32 output dims in f32 registers.
// Positions past a row's own (causal) are masked; tiles past the block's last row are never
// loaded.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/paged_prefill_attention.cuh"

namespace servelab::kernels::cuda {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 8;
constexpr int kRows = kWarps * kRowsPerWarp;  // 64 query rows per block
constexpr int kTile = 32;                     // K/V positions per tile, one per lane
static_assert(kRows == kPrefillRowsPerBlock);
static_assert(kTile == kPrefillCudaCoreKvTile);  // kernels/prefill_grid.h: the cost model's count

template <int kHeadDim>
constexpr size_t SharedBytes() {
  // q rows [kRows, kHeadDim] + K and V tiles [kTile, kHeadDim + 2], bf16.
  return sizeof(bf16) * (size_t{kRows} * kHeadDim + 2 * size_t{kTile} * (kHeadDim + 2));
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) PagedPrefillKernel(PrefillParams p) {
  constexpr int kStride = kHeadDim + 2;          // padded K/V tile row, bf16
  constexpr int kPairsPerLane = kHeadDim / 64;  // bf16 pairs of output dims per lane
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // [kRows, kHeadDim]
  bf16* k_s = q_s + kRows * kHeadDim;             // [kTile, kStride]
  bf16* v_s = k_s + kTile * kStride;              // [kTile, kStride]

  const int32_t kv_head = blockIdx.x, seq = blockIdx.y;
  const int32_t start = p.query_start_loc[seq];
  const int32_t query_len = p.query_start_loc[seq + 1] - start;
  const int32_t context_len = p.context_lens[seq];
  if (query_len < 0 || query_len > p.max_query_len || context_len < query_len ||
      context_len > p.max_context_len) {
    __trap();
  }
  const int32_t first_token = blockIdx.z * p.tokens_per_block;  // within the chunk
  if (first_token >= query_len) return;
  const int32_t num_tokens = min(p.tokens_per_block, query_len - first_token);
  const int32_t num_rows = num_tokens * p.group;
  const int32_t first_pos = context_len - query_len;  // position of chunk token 0
  const int32_t last_pos = first_pos + first_token + num_tokens - 1;  // of this block
  // The K/V tiles it walks, as the cost model counts them (kernels/prefill_grid.h).
  const int32_t num_tiles = static_cast<int32_t>(
      PrefillBlockKvTiles(first_pos, query_len, blockIdx.z, p.tokens_per_block, kTile));
  const int32_t* block_table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Stage the block's q rows (zeros past the last row).
  constexpr int kUnits = kHeadDim / 8;
  for (int i = threadIdx.x; i < kRows * kUnits; i += kThreads) {
    const int r = i / kUnits, u = i % kUnits;
    Bf16x8 v{};
    if (r < num_rows) {
      const int64_t token = start + first_token + r / p.group;
      const int32_t head = kv_head * p.group + r % p.group;
      v = reinterpret_cast<const Bf16x8*>(p.q + (token * p.num_heads + head) * kHeadDim)[u];
    }
    reinterpret_cast<Bf16x8*>(q_s)[i] = v;
  }

  float acc[kRowsPerWarp][2 * kPairsPerLane];
  float row_max[kRowsPerWarp], row_sum[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    row_max[rr] = -INFINITY;
    row_sum[rr] = 0.0f;
#pragma unroll
    for (int e = 0; e < 2 * kPairsPerLane; ++e) acc[rr][e] = 0.0f;
  }

  for (int32_t t = 0; t < num_tiles; ++t) {
    const int32_t tile = t * kTile;
    __syncthreads();  // previous tile fully consumed (and q staged, on the first)
    for (int i = threadIdx.x; i < kTile * kUnits; i += kThreads) {
      const int j = i / kUnits, u = i % kUnits;
      const int32_t pos = tile + j;
      Bf16x8 kv[2] = {};
      if (pos <= last_pos) {
        const int32_t block = block_table[pos / p.block_size];
        if (block < 0 || block >= p.num_blocks) __trap();
        const int64_t row = (int64_t{block} * p.block_size + pos % p.block_size) * p.num_kv_heads +
                            kv_head;
        kv[0] = reinterpret_cast<const Bf16x8*>(p.k_cache + row * kHeadDim)[u];
        kv[1] = reinterpret_cast<const Bf16x8*>(p.v_cache + row * kHeadDim)[u];
      }
      // Padded rows are only 4-byte aligned: store as pairs.
      auto* k_row = reinterpret_cast<__nv_bfloat162*>(k_s + j * kStride + u * 8);
      auto* v_row = reinterpret_cast<__nv_bfloat162*>(v_s + j * kStride + u * 8);
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        k_row[h] = kv[0].h[h];
        v_row[h] = kv[1].h[h];
      }
    }
    __syncthreads();

#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      if (r >= num_rows) break;  // warp-uniform
      const int32_t row_pos = first_pos + first_token + r / p.group;
      if (tile > row_pos) continue;  // the whole tile is in this row's future
      // Lane j scores position tile + j.
      const auto* q_row = reinterpret_cast<const __nv_bfloat162*>(q_s + r * kHeadDim);
      const auto* k_row = reinterpret_cast<const __nv_bfloat162*>(k_s + lane * kStride);
      float dot = 0.0f;
#pragma unroll 8
      for (int d = 0; d < kHeadDim / 2; ++d) {
        const float2 a = __bfloat1622float2(q_row[d]);
        const float2 b = __bfloat1622float2(k_row[d]);
        dot = fmaf(a.x, b.x, fmaf(a.y, b.y, dot));
      }
      const bool visible = tile + lane <= row_pos;
      const float s = visible ? dot * p.scale : -INFINITY;
      const float new_max = fmaxf(row_max[rr], detail::WarpMax(s));  // finite: lane 0 visible
      const float w = visible ? __expf(s - new_max) : 0.0f;
      const float c = __expf(row_max[rr] - new_max);
      row_sum[rr] = row_sum[rr] * c + detail::WarpSum(w);
      row_max[rr] = new_max;
#pragma unroll
      for (int e = 0; e < 2 * kPairsPerLane; ++e) acc[rr][e] *= c;
      const int visible_count = min(kTile, row_pos - tile + 1);
      for (int j = 0; j < visible_count; ++j) {
        const float wj = __shfl_sync(detail::kFullMask, w, j);
        const auto* v_row = reinterpret_cast<const __nv_bfloat162*>(v_s + j * kStride);
#pragma unroll
        for (int e = 0; e < kPairsPerLane; ++e) {
          const float2 v = __bfloat1622float2(v_row[lane + 32 * e]);
          acc[rr][2 * e] = fmaf(wj, v.x, acc[rr][2 * e]);
          acc[rr][2 * e + 1] = fmaf(wj, v.y, acc[rr][2 * e + 1]);
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= num_rows) break;
    const int64_t token = start + first_token + r / p.group;
    const int32_t head = kv_head * p.group + r % p.group;
    auto* out_row = reinterpret_cast<__nv_bfloat162*>(p.out + (token * p.num_heads + head) * kHeadDim);
    const float inv_sum = 1.0f / row_sum[rr];
#pragma unroll
    for (int e = 0; e < kPairsPerLane; ++e) {
      out_row[lane + 32 * e] =
          __floats2bfloat162_rn(acc[rr][2 * e] * inv_sum, acc[rr][2 * e + 1] * inv_sum);
    }
  }
}

template <int kHeadDim>
void Launch(const PrefillParams& p, int32_t num_seqs, cudaStream_t stream) {
  const auto tiles = static_cast<uint32_t>(PrefillQueryTiles(p.max_query_len, p.tokens_per_block));
  detail::LaunchWithSharedMemory(PagedPrefillKernel<kHeadDim>, dim3(p.num_kv_heads, num_seqs, tiles),
                                 kThreads, SharedBytes<kHeadDim>(), stream, p);
}

}  // namespace

void LaunchPrefillCudaCores(PrefillParams p, int32_t num_seqs, cudaStream_t stream) {
  p.tokens_per_block = PrefillTokensPerBlock(p.group);
  SERVELAB_KERNEL_CHECK(p.tokens_per_block > 0 &&
                        PrefillQueryTiles(p.max_query_len, p.tokens_per_block) <= 65535);
  switch (p.head_dim) {
    case 64: Launch<64>(p, num_seqs, stream); break;
    case 128: Launch<128>(p, num_seqs, stream); break;
    case 256: Launch<256>(p, num_seqs, stream); break;
    default: SERVELAB_KERNEL_CHECK_MSG(false, "head_dim %d", p.head_dim);
  }
}

namespace {

// SERVELAB_PREFILL_ATTENTION=cuda_cores keeps every launch on the CUDA-core kernel (to tell
// a tensor-core fault from another on a device; read once). Anything else: the default.
bool CudaCoresForced() {
  static const bool forced = [] {
    const char* value = std::getenv("SERVELAB_PREFILL_ATTENTION");
    return value != nullptr && std::strcmp(value, "cuda_cores") == 0;
  }();
  return forced;
}

}  // namespace

PrefillAttentionPath ChoosePrefillAttentionPath(int32_t head_dim, int32_t group) {
  // Both paths take any group up to kPrefillRowsPerBlock (the entry CHECKs it).
  return PrefillUsesTensorCores(head_dim, group) && !CudaCoresForced()
             ? PrefillAttentionPath::kTensorCores
             : PrefillAttentionPath::kCudaCores;
}

void PagedPrefillAttentionOnPath(PrefillAttentionPath path, bf16* out, const bf16* q,
                                 const bf16* k_cache, const bf16* v_cache,
                                 const int32_t* block_tables, const int32_t* query_start_loc,
                                 const int32_t* context_lens, int32_t num_seqs,
                                 int32_t num_query_tokens, int32_t num_heads,
                                 int32_t max_blocks_per_seq, int32_t max_query_len,
                                 int32_t max_context_len, float scale, const KvCacheShape& cache,
                                 cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(cache.Valid());
  SERVELAB_KERNEL_CHECK_MSG(num_heads > 0 && num_heads % cache.num_kv_heads == 0,
                            "num_heads %d, num_kv_heads %d", num_heads, cache.num_kv_heads);
  const int32_t group = num_heads / cache.num_kv_heads;
  SERVELAB_KERNEL_CHECK_MSG(group <= kPrefillRowsPerBlock, "group %d > %d", group,
                            kPrefillRowsPerBlock);
  SERVELAB_KERNEL_CHECK_MSG(cache.head_dim == 64 || cache.head_dim == 128 || cache.head_dim == 256,
                            "head_dim %d", cache.head_dim);
  SERVELAB_KERNEL_CHECK_MSG(
      path == PrefillAttentionPath::kCudaCores || cache.head_dim == 64 || cache.head_dim == 128,
      "tensor-core prefill attention: head_dim %d", cache.head_dim);
  SERVELAB_KERNEL_CHECK(num_seqs >= 0 && num_seqs <= 65535 && num_query_tokens >= 0);
  SERVELAB_KERNEL_CHECK(max_blocks_per_seq >= 0 && max_query_len >= 0);
  SERVELAB_KERNEL_CHECK(max_context_len >= max_query_len &&
                        int64_t{max_context_len} <= int64_t{max_blocks_per_seq} * cache.block_size);
  if (num_seqs == 0 || num_query_tokens == 0 || max_query_len == 0) return;
  const PrefillParams p{out, q, k_cache, v_cache, block_tables, query_start_loc, context_lens,
                        num_heads, group, /*tokens_per_block=*/0, max_blocks_per_seq,
                        max_query_len, max_context_len, scale, cache.num_blocks,
                        cache.block_size, cache.num_kv_heads, cache.head_dim};
  if (path == PrefillAttentionPath::kTensorCores) {
    LaunchPrefillTensorCores(p, num_seqs, stream);
  } else {
    LaunchPrefillCudaCores(p, num_seqs, stream);
  }
}

}  // namespace detail

void PagedPrefillAttention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache,
                           const int32_t* block_tables, const int32_t* query_start_loc,
                           const int32_t* context_lens, int32_t num_seqs, int32_t num_query_tokens,
                           int32_t num_heads, int32_t max_blocks_per_seq, int32_t max_query_len,
                           int32_t max_context_len, float scale, const KvCacheShape& cache,
                           cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(cache.Valid() && cache.num_kv_heads > 0);
  const detail::PrefillAttentionPath path =
      detail::ChoosePrefillAttentionPath(cache.head_dim, num_heads / cache.num_kv_heads);
  detail::PagedPrefillAttentionOnPath(path, out, q, k_cache, v_cache, block_tables,
                                      query_start_loc, context_lens, num_seqs, num_query_tokens,
                                      num_heads, max_blocks_per_seq, max_query_len,
                                      max_context_len, scale, cache, stream);
}

}  // namespace servelab::kernels::cuda
