// PagedDecodeAttention, flash-decoding style.
//
// Launch: grid (num_kv_heads, num_seqs, num_partitions), 128 threads. One thread block
// serves every query head of one GQA group (up to 8) against one kv head, so each K/V byte
// of its token range is read from device memory once. A token row of head_dim bf16 is read
// by head_dim / 8 lanes with 16-byte loads; a warp covers 32 * 8 / head_dim tokens at once.
//
// The block walks its token range in chunks of kPartition tokens: (1) q.k scores of the
// chunk for every head of the group into shared memory, (2) per head, raise the running max,
// turn scores into exp weights, rescale the running sum, (3) rescale the per-thread f32
// accumulators and add p * v. Contexts longer than one partition are split, when the caller
// gives a workspace, into one block per partition; each writes its normalised partial output
// with its (max, sum), and a reduce kernel merges them per (sequence, head).
//
// Partition length: 512 tokens when (sequences x kv heads x partitions) already gives two
// blocks per SM, else 256, else 128, so that a small batch (batch 1 at a 1k context: 16
// blocks at 512) still spreads its KV reads over the device. Callers may force one.
#include <algorithm>
#include <atomic>
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/decode_partition.h"

namespace servelab::kernels::cuda {
namespace {

using detail::Bf16x8;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int32_t kPartition = 512;  // tokens per chunk; the longest split partition
constexpr int32_t kMaxGroup = 8;
// Token rows each thread loads before it uses the first: its reads in flight at once.
constexpr int kUnroll = 4;

__device__ __forceinline__ Bf16x8 ZeroBf16x8() {
  Bf16x8 z;
#pragma unroll
  for (int i = 0; i < 4; ++i) z.h[i] = __floats2bfloat162_rn(0.0f, 0.0f);
  return z;
}

int32_t NumPartitions(int32_t max_context_len, int32_t partition_len) {
  return DecodePartitions(max_context_len, partition_len);
}

// The current device's SM count, queried once per device (every decode launch asks).
int32_t SmCount() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int32_t> counts[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();  // a failed query must not surface at the next launch check
    return 132;          // an H100/H200's count
  }
  int32_t count = counts[device].load(std::memory_order_relaxed);
  if (count > 0) return count;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count <= 0) {
    cudaGetLastError();
    return 132;
  }
  counts[device].store(count, std::memory_order_relaxed);
  return count;
}

// The longest partition that still gives two blocks per SM; the shortest otherwise
// (kernels/decode_partition.h, which the cost model counts too).
int32_t AutoPartitionLen(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context_len,
                         int32_t sm_count) {
  return DecodePartitionLen(num_seqs, num_kv_heads, max_context_len, sm_count);
}

size_t SplitBytes(int32_t num_seqs, int32_t num_heads, int32_t parts, int32_t head_dim) {
  return parts <= 1 ? 0 : sizeof(float) * size_t(num_seqs) * num_heads * parts * (head_dim + 2);
}

// Split-KV scratch: [num_seqs, num_heads, parts, head_dim] outputs, then [.., parts] maxima,
// then [.., parts] sums; f32.
struct Workspace {
  float* out;
  float* max;
  float* sum;
};

Workspace CarveWorkspace(float* base, int32_t num_seqs, int32_t num_heads, int32_t parts,
                         int32_t head_dim) {
  const int64_t rows = int64_t{num_seqs} * num_heads * parts;
  return Workspace{base, base + rows * head_dim, base + rows * head_dim + rows};
}

struct DecodeParams {
  bf16* out;
  const bf16* q;
  const bf16* k_cache;
  const bf16* v_cache;
  const int32_t* block_tables;
  const int32_t* context_lens;
  Workspace ws;  // used when num_parts > 1
  int32_t num_heads;
  int32_t group;
  int32_t max_blocks_per_seq;
  int32_t max_context_len;
  int32_t num_parts;  // 1: unsplit, the block covers the whole context
  int32_t partition_len;  // tokens per block when split
  float scale;
  int32_t num_blocks;
  int32_t block_size;
  int32_t num_kv_heads;
};

// Address of the 16-byte unit `unit` of the (position pos, kv head) row, or trap on a bad id.
template <int kHeadDim>
__device__ __forceinline__ const Bf16x8* Row(const bf16* cache, const int32_t* block_table,
                                             int32_t pos, int32_t kv_head, int32_t unit,
                                             const DecodeParams& p) {
  const int32_t block = block_table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) __trap();
  const int64_t slot = int64_t{block} * p.block_size + pos % p.block_size;
  return reinterpret_cast<const Bf16x8*>(cache + (slot * p.num_kv_heads + kv_head) * kHeadDim) +
         unit;
}

template <int kHeadDim, int kGroupTile>
__global__ void __launch_bounds__(kThreads)
    PagedDecodeKernel(DecodeParams p) {
  constexpr int kLanesPerToken = kHeadDim / 8;
  constexpr int kTokensPerWarp = 32 / kLanesPerToken;
  constexpr int kTokensPerStep = kWarps * kTokensPerWarp;
  extern __shared__ float smem[];  // scores [kGroupTile, kPartition], later the warp partials
  __shared__ float run_max[kGroupTile], run_sum[kGroupTile], correction[kGroupTile];

  const int32_t kv_head = blockIdx.x, seq = blockIdx.y, part = blockIdx.z;
  const int32_t context_len = p.context_lens[seq];
  if (context_len < 1 || context_len > p.max_context_len) __trap();
  int32_t begin = 0, end = context_len;
  if (p.num_parts > 1) {
    begin = part * p.partition_len;
    if (begin >= context_len) return;  // this sequence is shorter; the reduce skips it
    end = min(context_len, begin + p.partition_len);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int unit = lane % kLanesPerToken;  // which 8 dims of the row
  const int sub = warp * kTokensPerWarp + lane / kLanesPerToken;  // token slot in a step
  const int32_t* block_table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  const int32_t head0 = kv_head * p.group;  // first query head of the group

  float q[kGroupTile][8];
#pragma unroll
  for (int g = 0; g < kGroupTile; ++g) {
    if (g < p.group) {
      const Bf16x8 v = reinterpret_cast<const Bf16x8*>(
          p.q + (int64_t{seq} * p.num_heads + head0 + g) * kHeadDim)[unit];
      detail::ToFloat8(v, q[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] *= p.scale;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] = 0.0f;
    }
  }
  float acc[kGroupTile][8];
#pragma unroll
  for (int g = 0; g < kGroupTile; ++g) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
  }
  if (threadIdx.x < kGroupTile) {
    run_max[threadIdx.x] = -INFINITY;
    run_sum[threadIdx.x] = 0.0f;
  }
  float* scores = smem;

  for (int32_t chunk = begin; chunk < end; chunk += kPartition) {
    const int32_t n = min(kPartition, end - chunk);
    // (1) scores. Each thread first issues the loads of kUnroll token rows, then uses them:
    // kUnroll 16-byte reads in flight per thread rather than one, which is what keeps the
    // memory system busy at the occupancy this kernel's registers allow.
    for (int32_t j0 = 0; j0 < n; j0 += kTokensPerStep * kUnroll) {
      Bf16x8 rows[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t j = j0 + u * kTokensPerStep + sub;
        rows[u] = j < n ? *Row<kHeadDim>(p.k_cache, block_table, chunk + j, kv_head, unit, p)
                        : ZeroBf16x8();
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t j = j0 + u * kTokensPerStep + sub;
        float k[8];
        detail::ToFloat8(rows[u], k);
#pragma unroll
        for (int g = 0; g < kGroupTile; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(q[g][e], k[e], dot);
#pragma unroll
          for (int o = kLanesPerToken / 2; o > 0; o >>= 1) {
            dot += __shfl_xor_sync(detail::kFullMask, dot, o);
          }
          if (unit == 0 && j < n) scores[g * kPartition + j] = dot;
        }
      }
    }
    __syncthreads();
    // (2) softmax bookkeeping, one warp per head.
    for (int g = warp; g < p.group; g += kWarps) {
      float* s = scores + g * kPartition;
      float m = -INFINITY;
      for (int32_t j = lane; j < n; j += 32) m = fmaxf(m, s[j]);
      m = detail::WarpMax(m);
      const float old_max = run_max[g];
      const float new_max = fmaxf(old_max, m);
      float sum = 0.0f;
      for (int32_t j = lane; j < n; j += 32) {
        const float e = __expf(s[j] - new_max);
        s[j] = e;
        sum += e;
      }
      sum = detail::WarpSum(sum);
      if (lane == 0) {
        const float c = __expf(old_max - new_max);  // 0 on the first chunk
        correction[g] = c;
        run_sum[g] = run_sum[g] * c + sum;
        run_max[g] = new_max;
      }
    }
    __syncthreads();
    // (3) rescale and accumulate p * v.
#pragma unroll
    for (int g = 0; g < kGroupTile; ++g) {
      const float c = g < p.group ? correction[g] : 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= c;
    }
    for (int32_t j0 = 0; j0 < n; j0 += kTokensPerStep * kUnroll) {
      Bf16x8 rows[kUnroll];  // the loads first, as in (1)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t j = j0 + u * kTokensPerStep + sub;
        rows[u] = j < n ? *Row<kHeadDim>(p.v_cache, block_table, chunk + j, kv_head, unit, p)
                        : ZeroBf16x8();
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t j = j0 + u * kTokensPerStep + sub;
        if (j >= n) continue;
        float v[8];
        detail::ToFloat8(rows[u], v);
#pragma unroll
        for (int g = 0; g < kGroupTile; ++g) {
          const float w = g < p.group ? scores[g * kPartition + j] : 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(w, v[e], acc[g][e]);
        }
      }
    }
    __syncthreads();  // scores are overwritten by the next chunk
  }

  // Sum the accumulators of the token slots: across a warp, then across warps.
#pragma unroll
  for (int g = 0; g < kGroupTile; ++g) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
#pragma unroll
      for (int o = kLanesPerToken; o < 32; o <<= 1) {
        acc[g][e] += __shfl_xor_sync(detail::kFullMask, acc[g][e], o);
      }
    }
  }
  float* partial = smem;  // [kWarps, kGroupTile, kHeadDim]
  if (lane < kLanesPerToken) {
#pragma unroll
    for (int g = 0; g < kGroupTile; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) partial[(warp * kGroupTile + g) * kHeadDim + unit * 8 + e] = acc[g][e];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < p.group * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += partial[(w * kGroupTile + g) * kHeadDim + d];
    const float value = total / run_sum[g];
    const int64_t row = int64_t{seq} * p.num_heads + head0 + g;  // (seq, head)
    if (p.num_parts == 1) {
      p.out[row * kHeadDim + d] = __float2bfloat16(value);
    } else {
      const int64_t at = row * p.num_parts + part;
      p.ws.out[at * kHeadDim + d] = value;
      if (d == 0) {
        p.ws.max[at] = run_max[g];
        p.ws.sum[at] = run_sum[g];
      }
    }
  }
}

// Merges the partitions of one (sequence, head): grid (num_heads, num_seqs), head_dim threads.
__global__ void PagedDecodeReduceKernel(bf16* out, Workspace ws, const int32_t* context_lens,
                                        int32_t num_heads, int32_t num_parts, int32_t head_dim,
                                        int32_t partition_len) {
  const int32_t head = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int32_t parts = (context_lens[seq] + partition_len - 1) / partition_len;
  const int64_t row = int64_t{seq} * num_heads + head;
  const float* max = ws.max + row * num_parts;
  const float* sum = ws.sum + row * num_parts;
  float global_max = -INFINITY;
  for (int32_t i = 0; i < parts; ++i) global_max = fmaxf(global_max, max[i]);
  float weight_sum = 0.0f, value = 0.0f;
  for (int32_t i = 0; i < parts; ++i) {
    const float w = sum[i] * __expf(max[i] - global_max);
    weight_sum += w;
    value = fmaf(w, ws.out[(row * num_parts + i) * head_dim + d], value);
  }
  out[row * head_dim + d] = __float2bfloat16(value / weight_sum);
}

template <int kHeadDim, int kGroupTile>
void Launch(const DecodeParams& p, int32_t num_seqs, cudaStream_t stream) {
  const size_t floats = std::max<size_t>(size_t{kGroupTile} * kPartition,
                                         size_t{kWarps} * kGroupTile * kHeadDim);
  const dim3 grid(p.num_kv_heads, num_seqs, p.num_parts);
  PagedDecodeKernel<kHeadDim, kGroupTile>
      <<<grid, kThreads, floats * sizeof(float), stream>>>(p);
  SERVELAB_CUDA_LAUNCH_CHECK();
}

template <int kHeadDim>
void LaunchForGroup(const DecodeParams& p, int32_t num_seqs, cudaStream_t stream) {
  if (p.group == 1) {
    Launch<kHeadDim, 1>(p, num_seqs, stream);
  } else if (p.group == 2) {
    Launch<kHeadDim, 2>(p, num_seqs, stream);
  } else if (p.group <= 4) {
    Launch<kHeadDim, 4>(p, num_seqs, stream);
  } else {
    Launch<kHeadDim, 8>(p, num_seqs, stream);
  }
}

}  // namespace

size_t PagedDecodeAttentionWorkspaceBytes(int32_t num_seqs, int32_t num_heads,
                                          int32_t max_context_len, const KvCacheShape& cache,
                                          int32_t partition_len) {
  if (partition_len > 0) {
    SERVELAB_KERNEL_CHECK_MSG(partition_len == 128 || partition_len == 256 || partition_len == 512,
                              "partition_len %d", partition_len);
    return SplitBytes(num_seqs, num_heads, NumPartitions(max_context_len, partition_len),
                      cache.head_dim);
  }
  // The automatic length depends on the launch's sequence count and longest context (a
  // shorter context may take shorter partitions, hence more of them): the most any launch of
  // up to num_seqs sequences and max_context_len tokens can need. Partition counts change
  // only at multiples of 128 tokens, so those contexts (and the maximum) are enough to try.
  const int32_t sm_count = SmCount();
  size_t most = 0;
  for (int32_t s = 1; s <= num_seqs; ++s) {
    for (int32_t context = 128;; context += 128) {
      const int32_t c = std::min(context, max_context_len);
      const int32_t len = AutoPartitionLen(s, cache.num_kv_heads, c, sm_count);
      most = std::max(most, SplitBytes(s, num_heads, NumPartitions(c, len), cache.head_dim));
      if (c == max_context_len) break;
    }
  }
  return most;
}

void PagedDecodeAttention(bf16* out, const bf16* q, const bf16* k_cache, const bf16* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens,
                          int32_t num_seqs, int32_t num_heads, int32_t max_blocks_per_seq,
                          int32_t max_context_len, float scale, const KvCacheShape& cache,
                          float* workspace, size_t workspace_bytes, cudaStream_t stream,
                          int32_t partition_len) {
  SERVELAB_KERNEL_CHECK(cache.Valid());
  SERVELAB_KERNEL_CHECK_MSG(partition_len == 0 || partition_len == 128 || partition_len == 256 ||
                                partition_len == 512,
                            "partition_len %d", partition_len);
  SERVELAB_KERNEL_CHECK_MSG(num_heads > 0 && num_heads % cache.num_kv_heads == 0,
                            "num_heads %d, num_kv_heads %d", num_heads, cache.num_kv_heads);
  const int32_t group = num_heads / cache.num_kv_heads;
  SERVELAB_KERNEL_CHECK_MSG(group <= kMaxGroup, "group %d > %d", group, kMaxGroup);
  SERVELAB_KERNEL_CHECK_MSG(cache.head_dim == 64 || cache.head_dim == 128 || cache.head_dim == 256,
                            "head_dim %d", cache.head_dim);
  SERVELAB_KERNEL_CHECK(num_seqs >= 0 && num_seqs <= 65535 && max_blocks_per_seq >= 0);
  SERVELAB_KERNEL_CHECK(max_context_len >= 1 &&
                        int64_t{max_context_len} <= int64_t{max_blocks_per_seq} * cache.block_size);
  if (num_seqs == 0) return;
  int32_t len = partition_len > 0 ? partition_len
                                  : AutoPartitionLen(num_seqs, cache.num_kv_heads,
                                                     max_context_len, SmCount());
  size_t needed = SplitBytes(num_seqs, num_heads, NumPartitions(max_context_len, len),
                             cache.head_dim);
  if (partition_len == 0 && needed > workspace_bytes) {  // a short workspace: longer ones
    len = kDecodePartitionLens[0];
    needed = SplitBytes(num_seqs, num_heads, NumPartitions(max_context_len, len), cache.head_dim);
  }
  const bool split = needed > 0 && workspace != nullptr && workspace_bytes >= needed;
  const int32_t parts = split ? NumPartitions(max_context_len, len) : 1;
  SERVELAB_KERNEL_CHECK(parts <= 65535);
  DecodeParams p{out, q, k_cache, v_cache, block_tables, context_lens,
                 split ? CarveWorkspace(workspace, num_seqs, num_heads, parts, cache.head_dim)
                       : Workspace{},
                 num_heads, group, max_blocks_per_seq, max_context_len, parts, len, scale,
                 cache.num_blocks, cache.block_size, cache.num_kv_heads};
  switch (cache.head_dim) {
    case 64: LaunchForGroup<64>(p, num_seqs, stream); break;
    case 128: LaunchForGroup<128>(p, num_seqs, stream); break;
    default: LaunchForGroup<256>(p, num_seqs, stream); break;
  }
  if (split) {
    PagedDecodeReduceKernel<<<dim3(num_heads, num_seqs), cache.head_dim, 0, stream>>>(
        out, p.ws, context_lens, num_heads, parts, cache.head_dim, len);
    SERVELAB_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace servelab::kernels::cuda
