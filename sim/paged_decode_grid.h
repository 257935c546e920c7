#pragma once
// Decode attention as servelab's own CUDA kernel launches it, the work of the calibrated
// form's grid terms (OpWork::cta_tokens, reduce, partitions; op_model.h).
//
// The kernel (kernels/cuda/paged_decode_attention.cu) runs one thread block a (sequence,
// KV head, partition), the partition length by kernels/decode_partition.h's rule, and a
// block walks its partition's tokens chunk by chunk, each chunk's loads waiting on the
// last: measured on an H200 (Llama-3-8B, 8 KV heads), one sequence's decode takes about
// as long at 1k tokens as at 4k, and the time steps with the partition length and with
// each round of blocks the SMs take, not with the bytes. Counted here:
//   partition   the rule's length L for the launch (its sequences, KV heads, longest
//               context, the device's SMs)
//   blocks      each sequence's KV heads x ceil(attended / L): the blocks with tokens to
//               walk (the rest of the grid exits at once)
//   slots       SMs x resident_ctas: resident_ctas blocks run on an SM at once (what the
//               kernel's registers allow; calibrate fits it, 4 for the group of 4 query
//               heads a KV head on the H200)
//   cta_tokens  the blocks placed in launch order (KV head fastest, then sequence, then
//               partition) each on the slot that frees first (block_slots.h), the last to
//               end: the tokens the busiest SM's blocks walk one after another (alike
//               sequences: ceil(blocks / slots) waves x the partition). Counted as
//               waves x the blocks' mean walk until 2026-12-04: the H200's serving decode
//               steps of 65-128 sequences, their contexts mixed, were predicted 5.0-5.7%
//               short at 29 and 41 req/s with it, 3.0-3.6% with the slots
//               (experiments/results/h200/README.md)
//   reduce      1 when the launch has more than one partition (its longest context, or
//               a graph's context bucket, spans more than one): the kernel that merges
//               the partitions runs; partitions, the partitions it merges a sequence, the
//               longest sequence's (each of its blocks loops over its own sequence's)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/decode_partition.h"
#include "sim/block_slots.h"
#include "sim/memory.h"
#include "sim/op_model.h"

namespace servelab {

// The most blocks of an attention kernel (decode here, prefill in paged_prefill_grid.h) an
// SM is counted to run at once (calibrate tries each count up to it).
inline constexpr int32_t kMaxResidentCtas = 8;

// Adds the grid terms of a decode launch of `seqs` sequences, sequence i attending
// `attended(i)` tokens (its cached ones and the new one), on `sms` SMs running
// `resident_ctas` blocks each at once. The launch's context, which sets its partitions,
// is the longest attended, or `launch_context` when longer (a CUDA graph's context
// bucket, kernels/decode_graph_shape.h: the partitions past a sequence's context launch
// blocks that exit at once). Nothing when any of the three is < 1.
template <class Attended>
void AddPagedDecodeGridWork(OpWork& work, const OpShape& shape, int32_t sms, int32_t resident_ctas,
                            int64_t seqs, Attended attended, int64_t launch_context = 0) {
  if (sms < 1 || resident_ctas < 1 || seqs < 1) return;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t kv_heads = std::max<int64_t>(1, KvHeadsPerGpu(shape.model, shape.tensor_parallel));
  int64_t attended_most = 1;
  for (int64_t i = 0; i < seqs; ++i) attended_most = std::max<int64_t>(attended_most, attended(i));
  const int64_t longest = std::max(attended_most, launch_context);  // the launch's
  const int32_t len = kernels::DecodePartitionLen(
      static_cast<int32_t>(std::min(seqs, kMax)), static_cast<int32_t>(std::min(kv_heads, kMax)),
      static_cast<int32_t>(std::min(longest, kMax)), sms);
  double blocks = 0;
  for (int64_t i = 0; i < seqs; ++i) {
    const int64_t a = std::clamp<int64_t>(attended(i), 1, kMax);
    blocks += static_cast<double>(kv_heads * kernels::DecodePartitions(static_cast<int32_t>(a), len));
  }
  // The blocks as the SMs take them: all at once when they fit (the longest partition's
  // walk), else in launch order (KV head fastest, then sequence, then partition) onto the
  // slot that frees first: with alike sequences, waves x the partition; with mixed
  // contexts, the long ones' partitions where the short ones' blocks have left.
  const int64_t slots = int64_t{sms} * resident_ctas;
  if (blocks <= static_cast<double>(slots)) {
    work.cta_tokens += static_cast<double>(std::min<int64_t>(len, attended_most));
  } else {
    BlockSlots slots_of(slots, len);
    const int32_t launch_parts = kernels::DecodePartitions(static_cast<int32_t>(std::min(longest, kMax)), len);
    // Runs of alike blocks placed at once (full partitions mostly): the same placement.
    int64_t run_walk = 0, run_blocks = 0;
    for (int64_t part = 0; part < launch_parts; ++part) {
      for (int64_t i = 0; i < seqs; ++i) {
        const int64_t walk = std::min<int64_t>(len, std::clamp<int64_t>(attended(i), 1, kMax) - part * len);
        if (walk <= 0) continue;  // past its context: the block exits
        if (walk != run_walk) {
          if (run_blocks > 0) slots_of.Place(run_walk, run_blocks);
          run_walk = walk;
          run_blocks = 0;
        }
        run_blocks += kv_heads;
      }
    }
    if (run_blocks > 0) slots_of.Place(run_walk, run_blocks);
    work.cta_tokens += static_cast<double>(slots_of.Makespan());
  }
  if (kernels::DecodePartitions(static_cast<int32_t>(std::min(longest, kMax)), len) > 1) {
    work.reduce += 1;
    work.partitions += kernels::DecodePartitions(static_cast<int32_t>(std::min(attended_most, kMax)), len);
  }
}

// A decode step as the CUDA runner's graph runs it (kernels/decode_graph_shape.h): the
// launch's `graph_rows` rows, the step's `seqs` sequences (sequence i attending
// `attended(i)` tokens) and the padding's after them (one position each), launched for
// `context_bucket` (which covers every sequence's context; the runner's is
// kernels::DecodeGraphContextBucket of the longest).
template <class Attended>
void AddDecodeGraphLaunchWork(OpWork& work, const OpShape& shape, int32_t sms, int32_t resident_ctas,
                              int64_t seqs, int64_t graph_rows, Attended attended, int32_t context_bucket) {
  AddPagedDecodeGridWork(work, shape, sms, resident_ctas, std::max(seqs, graph_rows),
                         [&](int64_t i) { return i < seqs ? attended(i) : int64_t{1}; }, context_bucket);
}

}  // namespace servelab
