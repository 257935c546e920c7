// CPU paged decode attention, one thread: 16 sequences of 512 tokens, 8 query heads of
// 64, over 1, 2, 4 and 8 KV heads (4 MB of K and V a KV head), the blocks spread over a
// 32 MB pool, with the last-level cache evicted before every iteration (as between a
// layer's attention in two decode steps: from_dram 1) or not. Counters: token_heads_per_s,
// (attended token, query head) pairs a second, and kv_bytes_per_s. With 8 query heads a
// KV head the kernel computes more than it reads; with 1 it streams at the host's
// bandwidth. Measured here (2 cores, 2026-12-02, from DRAM, two runs each), against the
// kernel before, which walked the cache once per KV head (4 KV heads of 64: a 1 KB stride
// between one head's rows): 1 KV head 2.6 -> 1.7 ms, 2: 3.4 -> 2.4, 4: 6.2 -> 3.1,
// 8: 9.1 -> 3.4.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/paged_attention.h"

namespace servelab {
namespace {

constexpr int32_t kSeqs = 16;
constexpr int32_t kContext = 512;
constexpr int32_t kHeads = 8;
constexpr int32_t kHeadDim = 64;
constexpr int32_t kBlockSize = 16;
constexpr int64_t kPoolBytes = int64_t{32} << 20;   // one layer's K cache, as the engine's
constexpr int64_t kEvictBytes = int64_t{64} << 20;  // more than this host's L3

void BM_CpuPagedDecodeAttention(benchmark::State& state) {
  const auto kv_heads = static_cast<int32_t>(state.range(0));
  const bool from_dram = state.range(1) != 0;
  kernels::KvCacheShape cache;
  cache.block_size = kBlockSize;
  cache.num_kv_heads = kv_heads;
  cache.head_dim = kHeadDim;
  cache.num_blocks =
      static_cast<int32_t>(kPoolBytes / (int64_t{kBlockSize} * kv_heads * kHeadDim * 4));
  std::vector<float> k(static_cast<size_t>(cache.NumElements()), 0.01f);
  std::vector<float> v(k.size(), 0.02f);
  const int32_t blocks_per_seq = kContext / kBlockSize;
  // Each sequence's blocks spread over the pool, as a long-running block manager leaves them.
  std::vector<int32_t> block_tables(static_cast<size_t>(kSeqs) * blocks_per_seq);
  for (size_t i = 0; i < block_tables.size(); ++i) {
    block_tables[i] = static_cast<int32_t>((i * 37) % static_cast<size_t>(cache.num_blocks));
  }
  std::vector<int32_t> context_lens(kSeqs, kContext);
  std::vector<float> q(static_cast<size_t>(kSeqs) * kHeads * kHeadDim, 0.1f);
  std::vector<float> out(q.size());
  std::vector<char> evict(from_dram ? static_cast<size_t>(kEvictBytes) : 0, 1);
  for (auto _ : state) {
    if (from_dram) {
      state.PauseTiming();
      for (size_t i = 0; i < evict.size(); i += 64) ++evict[i];
      benchmark::DoNotOptimize(evict.data());
      state.ResumeTiming();
    }
    kernels::cpu::PagedDecodeAttention(out.data(), q.data(), k.data(), v.data(),
                                       block_tables.data(), context_lens.data(), kSeqs, kHeads,
                                       blocks_per_seq, kContext, 0.125f, cache);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["token_heads_per_s"] = benchmark::Counter(
      static_cast<double>(kSeqs) * kContext * kHeads, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_bytes_per_s"] = benchmark::Counter(
      2.0 * kSeqs * kContext * kv_heads * kHeadDim * sizeof(float),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
}
BENCHMARK(BM_CpuPagedDecodeAttention)
    ->ArgNames({"kv_heads", "from_dram"})
    ->ArgsProduct({{1, 2, 4, 8}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace servelab

BENCHMARK_MAIN();
