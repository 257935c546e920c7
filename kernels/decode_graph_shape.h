#pragma once
// Which CUDA graph servelab's CUDA runner replays for a pure-decode step (engine/cuda/
// decode_graphs.h), in plain C++: the runner captures and picks its graphs by these, and the
// calibrated cost model (sim/calibrated_cost_model.h) prices a decode step as the graph
// runs it. A step of S decodes replays the graph of DecodeGraphBatch(S) rows, the rows past
// S padding (one token each, attending one position, their logits unread), launched for the
// context bucket of its longest context: the decode attention kernel chooses and launches
// its partitions for the bucket (kernels/decode_partition.h), and a block whose partition
// starts past its sequence's context exits at once.
#include <cstdint>

namespace servelab::kernels {

// The graph's rows for `seqs` decodes: 1, 2, 4, then the next multiple of 8; at most
// `max_seqs` (the runner's max_num_seqs, which has a graph of its own; <= 0: no cap).
inline constexpr int32_t DecodeGraphBatch(int32_t seqs, int32_t max_seqs) {
  int64_t rows = seqs <= 1 ? 1 : seqs <= 2 ? 2 : seqs <= 4 ? 4 : (int64_t{seqs} + 7) / 8 * 8;
  if (max_seqs > 0 && rows > max_seqs) rows = max_seqs;
  return rows > INT32_MAX ? INT32_MAX : static_cast<int32_t>(rows);
}

// The graph's context bucket for a longest context of `context` tokens: the smallest power
// of two from 512 up that covers it, at most `max_model_len` (<= 0: no cap).
inline constexpr int32_t DecodeGraphContextBucket(int32_t context, int32_t max_model_len) {
  int64_t bucket = 512;
  while (bucket < context && (max_model_len <= 0 || bucket < max_model_len)) bucket *= 2;
  if (max_model_len > 0 && bucket > max_model_len) bucket = max_model_len;
  return bucket > INT32_MAX ? INT32_MAX : static_cast<int32_t>(bucket);
}

}  // namespace servelab::kernels
