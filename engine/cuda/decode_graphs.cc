#include "engine/cuda/decode_graphs.h"

#include "engine/cuda/device_memory.h"

namespace servelab::engine_cuda {

DecodeGraphs::~DecodeGraphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
}

Status DecodeGraphs::Get(const ForwardShape& f, cudaStream_t stream,
                         const std::function<Status(const ForwardShape&)>& forward,
                         cudaGraphExec_t* exec) {
  const std::pair<int32_t, int32_t> key{f.seqs, f.max_context_len};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // One eager pass first (it recomputes this step's KV, writing the same values again).
    SERVELAB_RETURN_IF_ERROR(forward(f));
    cudaGraph_t graph = nullptr;
    SERVELAB_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                         "beginning a graph capture");
    const Status captured = forward(f);
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (end != cudaSuccess) return CudaError(end, "capturing the decode graph");
    if (!captured.ok()) {
      cudaGraphDestroy(graph);
      return captured;
    }
    cudaGraphExec_t made = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&made, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) return CudaError(inst, "instantiating the decode graph");
    it = graphs_.emplace(key, made).first;
  }
  *exec = it->second;
  return Status::Ok();
}

}  // namespace servelab::engine_cuda
