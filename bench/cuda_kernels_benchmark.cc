// Decode attention bandwidth on the device, against a device-to-device copy measured in the
// same run. Llama-3-8B shapes (32 query heads, 8 kv heads, head_dim 128, block 16), batch
// 16 / 64, contexts 2k / 8k, split-KV and unsplit. Bytes counted: K and V of every context
// token once, plus q and out; the copy counts bytes read plus bytes written. Median of the
// timed launches (CUDA events) after warm-up; inputs random (never zeros).
// Then prefill attention, causal, whole prompts of 2048 tokens (one, and a batch of 8), same
// shapes, on the tensor-core path and on the CUDA-core path: FLOPs = 4 * heads * head_dim *
// (sum over query rows of the positions each attends to), TFLOP/s per path, and the largest
// difference between the two paths' outputs (relative to the row's magnitude; above 2e-2 the
// program reports MISMATCH and exits 1 after writing everything). Its CSV rows carry a 9th
// column, tflop_per_s (the decode rows leave it empty). Between the two, the cost of a
// decode launch's empty blocks (BenchmarkEmptyBlocks; rows decode_empty_blocks, whose bytes
// column holds the empty blocks and fraction_of_copy the ns each added).
//   usage: cuda_kernels_benchmark [results.csv]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "kernels/decode_partition.h"
#include "kernels/kernel_check.h"

namespace {

using servelab::kernels::KvCacheShape;
using servelab::kernels::cuda::bf16;

void CudaOk(cudaError_t err, const char* what) {
  SERVELAB_KERNEL_CHECK_MSG(err == cudaSuccess, "%s: %s", what, cudaGetErrorString(err));
}

template <typename T>
T* DeviceAlloc(size_t n) {
  T* p = nullptr;
  CudaOk(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  return p;
}

// Random bf16 in large buffers: a host pattern of 1M values repeated (no zeros).
void FillRandom(bf16* dst, size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> pattern(std::min<size_t>(n, 1 << 20));
  for (float& x : pattern) x = dist(rng);
  const auto host = servelab::kernels::cuda::ToBf16(pattern);
  for (size_t at = 0; at < n; at += host.size()) {
    const size_t count = std::min(host.size(), n - at);
    CudaOk(cudaMemcpy(dst + at, host.data(), count * sizeof(bf16), cudaMemcpyHostToDevice), "fill");
  }
}

// One decode launch's device buffers, freed with it: the K/V cache and the queries random
// (FillRandom), `tables` and `lens` copied up, split-KV workspace for `max_context` tokens.
struct DecodeBuffers {
  DecodeBuffers(const KvCacheShape& cache, int32_t batch, int32_t num_heads, int32_t head_dim,
                const std::vector<int32_t>& host_tables, const std::vector<int32_t>& host_lens,
                int32_t max_context, std::mt19937& rng)
      : k_cache(DeviceAlloc<bf16>(cache.NumElements())),
        v_cache(DeviceAlloc<bf16>(cache.NumElements())),
        q(DeviceAlloc<bf16>(size_t(batch) * num_heads * head_dim)),
        out(DeviceAlloc<bf16>(size_t(batch) * num_heads * head_dim)),
        tables(DeviceAlloc<int32_t>(host_tables.size())),
        lens(DeviceAlloc<int32_t>(host_lens.size())),
        ws_bytes(servelab::kernels::cuda::PagedDecodeAttentionWorkspaceBytes(batch, num_heads, max_context, cache)),
        ws(DeviceAlloc<float>(ws_bytes / sizeof(float) + 1)) {
    FillRandom(k_cache, cache.NumElements(), rng);
    FillRandom(v_cache, cache.NumElements(), rng);
    FillRandom(q, size_t(batch) * num_heads * head_dim, rng);
    CudaOk(cudaMemcpy(tables, host_tables.data(), host_tables.size() * 4, cudaMemcpyHostToDevice), "up");
    CudaOk(cudaMemcpy(lens, host_lens.data(), host_lens.size() * 4, cudaMemcpyHostToDevice), "up");
  }
  DecodeBuffers(const DecodeBuffers&) = delete;
  DecodeBuffers& operator=(const DecodeBuffers&) = delete;
  ~DecodeBuffers() {
    for (void* p : {static_cast<void*>(k_cache), static_cast<void*>(v_cache), static_cast<void*>(q),
                    static_cast<void*>(out), static_cast<void*>(tables), static_cast<void*>(lens),
                    static_cast<void*>(ws)}) {
      CudaOk(cudaFree(p), "free");
    }
  }
  bf16 *k_cache, *v_cache, *q, *out;
  int32_t *tables, *lens;
  size_t ws_bytes;
  float* ws;
};

// Median milliseconds of `reps` timed runs of fn after `warmup` untimed ones.
template <typename Fn>
double MedianMs(Fn&& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  CudaOk(cudaDeviceSynchronize(), "warmup");
  cudaEvent_t begin, end;
  CudaOk(cudaEventCreate(&begin), "event");
  CudaOk(cudaEventCreate(&end), "event");
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    CudaOk(cudaEventRecord(begin), "record");
    fn();
    CudaOk(cudaEventRecord(end), "record");
    CudaOk(cudaEventSynchronize(end), "sync");
    float t = 0;
    CudaOk(cudaEventElapsedTime(&t, begin, end), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Prefill attention, Llama-3-8B shapes, causal whole prompts of 2048 tokens, batch 1 and 8:
// both paths timed; their outputs compared once per batch. False on a mismatch.
bool BenchmarkPrefill(FILE* csv, double copy_gbs, std::mt19937& rng) {
  namespace detail = servelab::kernels::cuda::detail;
  using detail::PrefillAttentionPath;
  const int32_t num_heads = 32, num_kv_heads = 8, head_dim = 128, block_size = 16;
  const int32_t prompt = 2048;
  bool ok = true;
  std::printf("\n%-13s %6s %8s %9s %9s %8s %10s\n", "prefill", "batch", "prompt", "ms", "TFLOP/s",
              "GB/s", "cc / tc");
  for (const int32_t batch : {1, 8}) {
    const int32_t blocks_per_seq = prompt / block_size;
    const KvCacheShape cache{batch * blocks_per_seq, block_size, num_kv_heads, head_dim};
    const int32_t num_tokens = batch * prompt;
    const size_t q_elems = size_t(num_tokens) * num_heads * head_dim;
    bf16* k_cache = DeviceAlloc<bf16>(cache.NumElements());
    bf16* v_cache = DeviceAlloc<bf16>(cache.NumElements());
    bf16* q = DeviceAlloc<bf16>(q_elems);
    bf16* out_tc = DeviceAlloc<bf16>(q_elems);
    bf16* out_cc = DeviceAlloc<bf16>(q_elems);
    FillRandom(k_cache, cache.NumElements(), rng);
    FillRandom(v_cache, cache.NumElements(), rng);
    FillRandom(q, q_elems, rng);
    std::vector<int32_t> tables(size_t(batch) * blocks_per_seq);
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), rng);
    std::vector<int32_t> lens(batch, prompt), start(batch + 1);
    for (int32_t s = 0; s <= batch; ++s) start[s] = s * prompt;
    int32_t* d_tables = DeviceAlloc<int32_t>(tables.size());
    int32_t* d_lens = DeviceAlloc<int32_t>(lens.size());
    int32_t* d_start = DeviceAlloc<int32_t>(start.size());
    CudaOk(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice), "up");
    CudaOk(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "up");
    CudaOk(cudaMemcpy(d_start, start.data(), start.size() * 4, cudaMemcpyHostToDevice), "up");
    // Query row i of a prompt attends to positions 0..i: prompt * (prompt + 1) / 2 per head.
    const double flops =
        4.0 * num_heads * head_dim * batch * (double(prompt) * (prompt + 1) / 2.0);
    const double bytes = 2.0 * cache.NumElements() * sizeof(bf16) +
                         2.0 * q_elems * sizeof(bf16) + tables.size() * 4;
    double tc_ms = 0.0;
    for (const PrefillAttentionPath path :
         {PrefillAttentionPath::kTensorCores, PrefillAttentionPath::kCudaCores}) {
      const bool tc = path == PrefillAttentionPath::kTensorCores;
      bf16* out = tc ? out_tc : out_cc;
      const double ms = MedianMs(
          [&] {
            detail::PagedPrefillAttentionOnPath(
                path, out, q, k_cache, v_cache, d_tables, d_start, d_lens, batch, num_tokens,
                num_heads, blocks_per_seq, prompt, prompt, 1.0f / std::sqrt(float(head_dim)),
                cache, nullptr);
          },
          2, tc ? 10 : 5);
      CudaOk(cudaDeviceSynchronize(), "prefill");
      if (tc) tc_ms = ms;
      const double tflops = flops / (ms * 1e-3) / 1e12;
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      const char* mode = tc ? "tensor_cores" : "cuda_cores";
      char speedup[32] = "";  // on the CUDA-core row: how many times slower than tensor cores
      if (!tc) std::snprintf(speedup, sizeof(speedup), "%.2fx", ms / tc_ms);
      std::printf("%-13s %6d %8d %9.3f %9.1f %8.0f %10s\n", mode, batch, prompt, ms, tflops, gbs,
                  speedup);
      if (csv) {
        std::fprintf(csv, "prefill_attention,%d,%d,%s,%.5f,%.0f,%.1f,%.3f,%.2f\n", batch, prompt,
                     mode, ms, bytes, gbs, gbs / copy_gbs, tflops);
      }
    }
    // The two paths on the same inputs: worst difference relative to the row's magnitude.
    std::vector<bf16> host_tc(q_elems), host_cc(q_elems);
    CudaOk(cudaMemcpy(host_tc.data(), out_tc, q_elems * sizeof(bf16), cudaMemcpyDeviceToHost),
           "down");
    CudaOk(cudaMemcpy(host_cc.data(), out_cc, q_elems * sizeof(bf16), cudaMemcpyDeviceToHost),
           "down");
    const auto tc_f = servelab::kernels::cuda::ToF32(host_tc);
    const auto cc_f = servelab::kernels::cuda::ToF32(host_cc);
    double worst = 0.0;
    for (size_t row = 0; row < q_elems / head_dim; ++row) {
      double scale = 0.0, err = 0.0;
      for (int32_t d = 0; d < head_dim; ++d) {
        const size_t at = row * head_dim + d;
        scale = std::max(scale, std::abs(double(cc_f[at])));
        const double diff = std::abs(double(tc_f[at]) - double(cc_f[at]));
        err = std::isnan(diff) ? INFINITY : std::max(err, diff);
      }
      worst = std::max(worst, err / std::max(scale, 1e-30));
    }
    const bool match = worst <= 2e-2;
    ok = ok && match;
    std::printf("%-13s %6d %8d max |tensor - cuda cores| = %.2e of the row's magnitude%s\n",
                "paths agree", batch, prompt, worst, match ? "" : "  MISMATCH");
    for (void* p : {static_cast<void*>(k_cache), static_cast<void*>(v_cache),
                    static_cast<void*>(q), static_cast<void*>(out_tc), static_cast<void*>(out_cc),
                    static_cast<void*>(d_tables), static_cast<void*>(d_lens),
                    static_cast<void*>(d_start)}) {
      CudaOk(cudaFree(p), "free");
    }
  }
  return ok;
}

}  // namespace

// A CUDA graph's decode launch (kernels/decode_graph_shape.h) is for its context bucket:
// every sequence gets the bucket's partitions, and those past its own context launch
// blocks that exit at once, which the cost model counts as free. Here the same sequences
// (64 of 300 tokens, Llama-3-8B's heads) launched for their own context and for buckets of
// 2,048 and 8,192: the time beyond their own launch over the empty blocks is what one
// costs the launch (run 4's decode residual grew with them: experiments/results/h200/
// README.md). Rows: kernel decode_empty_blocks, mode "launch-<context>", bytes the empty
// blocks, gb_per_s empty, fraction_of_copy the ns an empty block added.
void BenchmarkEmptyBlocks(FILE* csv, int32_t sm_count, std::mt19937& rng) {
  const int32_t batch = 64, context = 300, num_heads = 32, num_kv_heads = 8, head_dim = 128,
                block_size = 16, most = 8192;
  const int32_t blocks_per_seq = (context + block_size - 1) / block_size;
  const KvCacheShape cache{batch * blocks_per_seq, block_size, num_kv_heads, head_dim};
  // A table stride for the longest launch, each sequence's first blocks its own.
  const int32_t stride = most / block_size;
  std::vector<int32_t> tables(size_t(batch) * stride, 0);
  for (int32_t s = 0; s < batch; ++s) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) tables[size_t(s) * stride + b] = s * blocks_per_seq + b;
  }
  const DecodeBuffers d(cache, batch, num_heads, head_dim, tables, std::vector<int32_t>(batch, context), most, rng);
  std::printf("\nempty blocks: %d sequences of %d tokens, launched for a longer context\n", batch, context);
  std::printf("%-14s %10s %10s %8s %14s\n", "launch", "ms", "blocks", "empty", "ns an empty");
  double own_ms = 0;
  for (const int32_t launch : {context, 2048, most}) {
    const int32_t len = servelab::kernels::DecodePartitionLen(batch, num_kv_heads, launch, sm_count);
    const int64_t blocks = int64_t{batch} * num_kv_heads * servelab::kernels::DecodePartitions(launch, len);
    const int64_t empty =
        blocks - int64_t{batch} * num_kv_heads * servelab::kernels::DecodePartitions(context, len);
    const double ms = MedianMs(
        [&] {
          servelab::kernels::cuda::PagedDecodeAttention(d.out, d.q, d.k_cache, d.v_cache, d.tables, d.lens, batch,
                                                        num_heads, stride, launch,
                                                        1.0f / std::sqrt(float(head_dim)), cache, d.ws, d.ws_bytes,
                                                        nullptr);
        },
        3, 50);
    CudaOk(cudaDeviceSynchronize(), "decode (empty blocks)");
    if (launch == context) own_ms = ms;
    const double ns_each = empty > 0 ? (ms - own_ms) * 1e6 / static_cast<double>(empty) : 0.0;
    std::printf("launch-%-7d %10.4f %10lld %8lld %14.2f\n", launch, ms, static_cast<long long>(blocks),
                static_cast<long long>(empty), ns_each);
    if (csv) {
      std::fprintf(csv, "decode_empty_blocks,%d,%d,launch-%d,%.5f,%lld,,%.3f\n", batch, context, launch, ms,
                   static_cast<long long>(empty), ns_each);
    }
  }
}

int main(int argc, char** argv) {
  FILE* csv = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  cudaDeviceProp prop{};
  CudaOk(cudaGetDeviceProperties(&prop, 0), "device");
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::mt19937 rng(7);

  // Copy ceiling: 2 GiB device to device.
  const size_t copy_bytes = size_t{2} << 30;
  char* src = DeviceAlloc<char>(copy_bytes);
  char* dst = DeviceAlloc<char>(copy_bytes);
  CudaOk(cudaMemset(src, 0x5a, copy_bytes), "memset");
  const double copy_ms = MedianMs(
      [&] { CudaOk(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice), "copy"); }, 3,
      20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("d2d copy: %.3f ms for 2 GiB, %.0f GB/s (read + write)\n", copy_ms, copy_gbs);
  CudaOk(cudaFree(src), "free");
  CudaOk(cudaFree(dst), "free");
  if (csv) {
    std::fprintf(csv, "kernel,batch,context,mode,ms,bytes,gb_per_s,fraction_of_copy,tflop_per_s\n");
    std::fprintf(csv, "d2d_copy,0,0,-,%.5f,%zu,%.1f,1.000\n", copy_ms, 2 * copy_bytes, copy_gbs);
  }

  const int32_t num_heads = 32, num_kv_heads = 8, head_dim = 128, block_size = 16;
  std::printf("\n%-8s %6s %8s %8s %10s %10s %8s\n", "mode", "batch", "context", "ms", "GB/s",
              "of copy", ">=75%?");
  // Batch 1 shows the small-launch partitioning; the target is for batch >= 16.
  for (const int32_t batch : {1, 16, 64}) {
    for (const int32_t context : {2048, 8192}) {
      const int32_t blocks_per_seq = context / block_size;
      const KvCacheShape cache{batch * blocks_per_seq, block_size, num_kv_heads, head_dim};
      std::vector<int32_t> tables(size_t(batch) * blocks_per_seq);
      std::iota(tables.begin(), tables.end(), 0);
      std::shuffle(tables.begin(), tables.end(), rng);  // scattered blocks, as in serving
      const DecodeBuffers d(cache, batch, num_heads, head_dim, tables, std::vector<int32_t>(batch, context), context,
                            rng);
      const double bytes = 2.0 * cache.NumElements() * sizeof(bf16) +
                           2.0 * batch * num_heads * head_dim * sizeof(bf16) + tables.size() * 4;
      for (const bool split : {true, false}) {
        const double ms = MedianMs(
            [&] {
              servelab::kernels::cuda::PagedDecodeAttention(
                  d.out, d.q, d.k_cache, d.v_cache, d.tables, d.lens, batch, num_heads, blocks_per_seq,
                  context, 1.0f / std::sqrt(float(head_dim)), cache, split ? d.ws : nullptr,
                  split ? d.ws_bytes : 0, nullptr);
            },
            3, 20);
        CudaOk(cudaDeviceSynchronize(), "decode");
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        const char* mode = split ? "split" : "unsplit";
        const char* verdict = batch < 16 ? "" : gbs >= 0.75 * copy_gbs ? "yes" : "NO";
        std::printf("%-8s %6d %8d %8.4f %10.0f %9.1f%% %8s\n", mode, batch, context, ms, gbs,
                    100.0 * gbs / copy_gbs, verdict);
        if (csv) {
          std::fprintf(csv, "decode_attention,%d,%d,%s,%.5f,%.0f,%.1f,%.3f\n", batch, context,
                       mode, ms, bytes, gbs, gbs / copy_gbs);
        }
      }
    }
  }
  BenchmarkEmptyBlocks(csv, prop.multiProcessorCount, rng);
  const bool prefill_ok = BenchmarkPrefill(csv, copy_gbs, rng);
  if (csv) std::fclose(csv);
  return prefill_ok ? 0 : 1;
}
