#pragma once
// How the CUDA decode attention kernel (kernels/cuda/paged_decode_attention.cu) splits a
// launch's contexts into partitions, in plain C++: the kernel launches by it, and the
// calibrated cost model (sim/paged_decode_grid.h) counts the same grid, so the two cannot
// drift apart.
//
// One thread block a (sequence, KV head, partition); a block walks its partition's tokens
// one chunk after another, so the launch's time follows its longest partition and the
// waves of blocks the device runs, more than its bytes. Partition length: 512 tokens when
// (sequences x KV heads x partitions) already gives two blocks a multiprocessor, else 256,
// else 128 (the shortest, also when even 128 does not give two a multiprocessor).
#include <cstdint>

namespace servelab::kernels {

inline constexpr int32_t kDecodePartitionLens[] = {512, 256, 128};  // longest first

// Partitions of `partition_len` tokens that cover `context_len` tokens.
inline constexpr int32_t DecodePartitions(int32_t context_len, int32_t partition_len) {
  return (context_len + partition_len - 1) / partition_len;
}

// The partition length the kernel picks for `num_seqs` sequences whose longest context
// is `max_context_len` tokens, `num_kv_heads` KV heads, on `sm_count` multiprocessors.
inline constexpr int32_t DecodePartitionLen(int32_t num_seqs, int32_t num_kv_heads,
                                            int32_t max_context_len, int32_t sm_count) {
  for (const int32_t len : kDecodePartitionLens) {
    if (int64_t{num_seqs} * num_kv_heads * DecodePartitions(max_context_len, len) >=
        2 * int64_t{sm_count}) {
      return len;
    }
  }
  return kDecodePartitionLens[2];
}

}  // namespace servelab::kernels
