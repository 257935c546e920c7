#pragma once
// CUDA graphs for pure-decode steps (every seq brings one token and emits), one per
// padded batch size (1, 2, 4, 8, then multiples of 8, up to max_num_seqs) and context
// bucket (the smallest power of two >= 512 tokens covering the longest context, up to
// max_model_len; both in kernels/decode_graph_shape.h, which the cost model counts too),
// which fixes the decode kernel's partition count and the block-table stride. Each is
// captured after one eager warm-up pass (lazily loaded kernels and cuBLAS's heuristics
// settle outside the capture). The runner captures them all when it is made, as vLLM
// does, so no timed step pays for a capture.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "core/status.h"
#include "engine/cuda/device_step.h"
#include "kernels/decode_graph_shape.h"

namespace servelab::engine_cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;
  ~DecodeGraphs();

  // The graph for f's (rows, context bucket), captured on `stream` now if it does not
  // exist yet. `forward` enqueues one forward pass over f and returns its error.
  Status Get(const ForwardShape& f, cudaStream_t stream,
             const std::function<Status(const ForwardShape&)>& forward, cudaGraphExec_t* exec);
  int32_t Count() const { return static_cast<int32_t>(graphs_.size()); }

 private:
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs_;  // (batch, context bucket)
};

}  // namespace servelab::engine_cuda
