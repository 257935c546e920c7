#pragma once
// Test sequences with known K/V laid into a paged cache under shuffled block tables, and
// the dense float64 attention they should produce.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/kv_cache_shape.h"
#include "kernels/write_kv_cache.h"
#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels::testing {

struct AttentionGeometry {
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
};

class PagedKvFixture {
 public:
  static constexpr int32_t kSpareBlocks = 5;  // never in a block table, left NaN

  // Sequence s has lens[s] tokens of random K/V; blocks are a random permutation of the
  // cache's ids (not contiguous, not in order); unused table entries are -1 and the
  // cache starts NaN, so reading anything not written is caught.
  PagedKvFixture(AttentionGeometry geometry, std::vector<int32_t> lens, uint32_t seed)
      : g_(geometry), lens_(std::move(lens)), rng_(seed) {
    const int32_t bs = g_.block_size;
    int32_t needed = 0;
    for (int32_t len : lens_) {
      needed += (len + bs - 1) / bs;
      max_blocks_per_seq_ = std::max(max_blocks_per_seq_, (len + bs - 1) / bs);
    }
    shape_ = KvCacheShape{needed + kSpareBlocks, bs, g_.num_kv_heads, g_.head_dim};
    std::vector<int32_t> ids(shape_.num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    block_tables_.assign(size_t(NumSeqs()) * max_blocks_per_seq_, -1);
    size_t next = 0;
    for (int32_t s = 0; s < NumSeqs(); ++s) {
      for (int32_t b = 0; b < (lens_[s] + bs - 1) / bs; ++b) {
        block_tables_[size_t(s) * max_blocks_per_seq_ + b] = ids[next++];
      }
      k_.push_back(RandomNormal(size_t(lens_[s]) * shape_.SlotStride(), rng_));
      v_.push_back(RandomNormal(size_t(lens_[s]) * shape_.SlotStride(), rng_));
    }
    k_cache_.resize(shape_.NumElements());
    v_cache_.resize(shape_.NumElements());
    Poison(k_cache_);
    Poison(v_cache_);
  }

  int32_t NumSeqs() const { return static_cast<int32_t>(lens_.size()); }
  int32_t Len(int32_t s) const { return lens_[s]; }
  int32_t MaxLen() const { return *std::max_element(lens_.begin(), lens_.end()); }
  int32_t MaxBlocksPerSeq() const { return max_blocks_per_seq_; }
  const KvCacheShape& Shape() const { return shape_; }
  const int32_t* BlockTables() const { return block_tables_.data(); }
  const float* KCache() const { return k_cache_.data(); }
  const float* VCache() const { return v_cache_.data(); }
  float Scale() const { return 1.0f / std::sqrt(static_cast<float>(g_.head_dim)); }
  std::mt19937& Rng() { return rng_; }

  // Writes positions [begin, end) of sequence s into the cache with WriteKvCache.
  void Write(int32_t s, int32_t begin, int32_t end) {
    std::vector<int64_t> slots;
    for (int32_t p = begin; p < end; ++p) {
      const int32_t block = block_tables_[size_t(s) * max_blocks_per_seq_ + p / g_.block_size];
      slots.push_back(int64_t{block} * g_.block_size + p % g_.block_size);
    }
    const int64_t offset = int64_t{begin} * shape_.SlotStride();
    cpu::WriteKvCache(k_cache_.data(), v_cache_.data(), k_[s].data() + offset,
                      v_[s].data() + offset, slots.data(), end - begin, shape_);
  }
  void WriteAll() {
    for (int32_t s = 0; s < NumSeqs(); ++s) Write(s, 0, lens_[s]);
  }

  // Dense float64 attention of one query token q [num_heads, head_dim] at position `pos`
  // of sequence s over its positions 0..pos; appends [num_heads, head_dim] to `out`.
  void Reference(int32_t s, const float* q, int32_t pos, std::vector<double>& out) const {
    const int32_t hd = g_.head_dim;
    const int32_t group = g_.num_heads / g_.num_kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int32_t h = 0; h < g_.num_heads; ++h) {
      const int32_t kvh = h / group;
      std::vector<double> scores(pos + 1);
      for (int32_t j = 0; j <= pos; ++j) {
        const float* k = k_[s].data() + (int64_t{j} * g_.num_kv_heads + kvh) * hd;
        double dot = 0.0;
        for (int32_t d = 0; d < hd; ++d) dot += double{q[h * hd + d]} * k[d];
        scores[j] = dot * scale;
      }
      const double max = *std::max_element(scores.begin(), scores.end());
      double sum = 0.0;
      for (double& x : scores) sum += (x = std::exp(x - max));
      for (int32_t d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int32_t j = 0; j <= pos; ++j) {
          acc += scores[j] * v_[s][(int64_t{j} * g_.num_kv_heads + kvh) * hd + d];
        }
        out.push_back(acc / sum);
      }
    }
  }

 private:
  AttentionGeometry g_;
  std::vector<int32_t> lens_;
  std::mt19937 rng_;
  int32_t max_blocks_per_seq_ = 0;
  KvCacheShape shape_;
  std::vector<int32_t> block_tables_;      // [num_seqs, max_blocks_per_seq]
  std::vector<std::vector<float>> k_, v_;  // per seq: [len, num_kv_heads, head_dim]
  std::vector<float> k_cache_, v_cache_;   // [num_blocks, block_size, num_kv_heads, head_dim]
};

}  // namespace servelab::kernels::testing
