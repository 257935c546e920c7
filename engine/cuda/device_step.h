#pragma once
// One forward pass of the CUDA runner: the packed step uploaded to the device (one
// host-to-device copy from pinned memory), then
//   embed -> per layer: [fused add +] RMSNorm -> one q|k|v GEMM (+ bias) -> RoPE on q and
//   k, k and v into the paged cache, in one kernel -> attention -> o_proj -> fused add +
//   RMSNorm -> gate_up GEMM -> SiLU*mul -> down GEMM -> final fused add + RMSNorm and LM
//   head on the emitting rows (f32 logits), optionally greedy or top-p sampling.
// Attention: PagedDecodeAttention (split-KV) when every seq brings one token, else
// PagedPrefillAttention over the whole pack (decodes are chunks of one).
//
// It owns the activations (sized once for the largest step), the step's metadata and
// staging buffers, the sampling buffers and the split-KV workspace; it reads the weights
// and the KV pool it was made with. Everything is enqueued on the context's stream.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <span>

#include <vector>

#include "core/op.h"
#include "core/status.h"
#include "engine/cuda/device_context.h"
#include "engine/cuda/device_kv_pool.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_weights.h"
#include "engine/model_config.h"
#include "engine/sampler.h"
#include "engine/step_pack.h"

namespace servelab::engine_cuda {

// What one forward pass runs over: the step's sizes and the metadata's device addresses.
struct ForwardShape {
  int32_t tokens = 0, seqs = 0, emitting = 0;
  int32_t max_query_len = 0, max_context_len = 0, block_table_stride = 0;
  bool decode_attention = false;  // every seq brings one token
  // A mixed step's leading seqs of one token each (the scheduler puts its running decodes
  // first): the decode kernel attends them, the prefill kernel the rest, as vLLM's split
  // of decode and prefill metadata does; their longest context.
  int32_t decode_prefix = 0;
  int32_t decode_prefix_max_context = 0;
  bool emit_all_rows = false;     // emitting rows are exactly rows 0..tokens-1: no gather
  bool sample_greedy = false;     // append GreedySample into the sampled-ids buffer
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int32_t* query_start_loc = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* emit_rows = nullptr;
};

// The largest step the buffers hold.
struct StepSizes {
  int32_t max_tokens = 0;     // activation rows
  int32_t max_seqs = 0;       // seqs, emitting rows, decode-graph batch
  int32_t max_stride = 0;     // block-table entries per seq at max_model_len
  int32_t max_model_len = 0;  // the longest context
  int32_t block_size = 0;
};

// Times a forward pass op by op (profiling): an event after each op on the stream, the
// op charged the time since the previous event. Events are created once; a pass that
// marks more ops than `capacity` stops marking (Report says so).
class OpEvents {
 public:
  OpEvents() = default;
  OpEvents(const OpEvents&) = delete;
  OpEvents& operator=(const OpEvents&) = delete;
  ~OpEvents();
  Status Init(int32_t capacity);
  void Start(cudaStream_t stream);  // before the pass's first op
  void Mark(Op op, cudaStream_t stream);
  // Waits for the last event and hands each op's time (seconds) to `record`, once: the
  // events are spent (a later Report without a Start reports nothing, not them again).
  Status Report(const std::function<void(Op, double)>& record);

 private:
  cudaEvent_t start_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<Op> ops_;
  size_t used_ = 0;
  bool overflow_ = false;
  cudaError_t record_error_ = cudaSuccess;  // the first failed cudaEventRecord since Start
};

class DeviceStep {
 public:
  DeviceStep(const ModelConfig& config, const DeviceContext& context,
             const DeviceWeights& weights, const DeviceKvPool& kv)
      : config_(config), context_(context), weights_(weights), kv_(kv) {}

  Status Allocate(const StepSizes& sizes);

  // Uploads `pack` as `rows` tokens and `seqs` seqs with block tables `stride` apart (rows
  // and seqs past the pack's are padding); fills `f` with the sizes and device addresses.
  Status Stage(const StepPack& pack, int32_t rows, int32_t seqs, int32_t stride, ForwardShape& f);
  // Pads a pure decode of S <= B seqs to B rows for the decode graph of (B, bucket) and
  // stages it: padding rows read block 0 at context 1, write no KV (slot -1), and their
  // logits are ignored; the bucket is the longest context the graph bakes in.
  Status StageDecodeGraph(StepPack& pack, int32_t B, int32_t bucket, ForwardShape& f);
  // Enqueues one forward pass over `f`. The first cuBLAS failure is kept for TakeError.
  // With `events`, each op is followed by an event (profiling; not inside a graph
  // capture). The fused RoPE + KV-cache write is charged to rope.
  void Forward(const ForwardShape& f, OpEvents* events = nullptr);
  Status TakeError() { return std::exchange(error_, Status::Ok()); }
  // TopPSample over the first `rows` logits with `uniforms` as the draws.
  Status SampleTopP(int32_t rows, const SamplingParams& params, std::span<const double> uniforms);

  const float* Logits() const { return logits_; }   // [max_seqs, vocab], device
  const int32_t* Sampled() const { return sampled_; }  // [max_seqs], device
  int32_t* SampledHost() const { return sampled_host_; }  // [max_seqs], pinned

 private:
  // y [rows, out] = x [rows, in] * W^T on cuBLAS, W [out, in] row-major.
  void Gemm(const bf16* x, int32_t rows, const bf16* w, int32_t out, int32_t in, void* y,
            cudaDataType_t y_type);

  const ModelConfig& config_;
  const DeviceContext& context_;
  const DeviceWeights& weights_;
  const DeviceKvPool& kv_;
  StepSizes sizes_;
  DeviceArena memory_;
  Status error_;  // the first cuBLAS failure inside a forward pass
  float* inv_freq_ = nullptr;
  // Activations [rows, width], bf16, sized for max_tokens rows (last_*: max_seqs).
  bf16 *hidden_ = nullptr, *residual_ = nullptr, *q_ = nullptr, *qkv_ = nullptr,
       *attn_ = nullptr, *gate_up_ = nullptr, *act_ = nullptr;
  bf16 *last_hidden_ = nullptr, *last_residual_ = nullptr;
  float* logits_ = nullptr;          // [max_seqs, vocab]
  int32_t* sampled_ = nullptr;       // [max_seqs] device
  int32_t* sampled_host_ = nullptr;  // [max_seqs] pinned
  // TopPSample's per-row inputs: uniforms (f64), temperatures, top_ps (f32), top_ks (i32);
  // device, and a pinned staging copy of the same layout.
  unsigned char* sample_inputs_ = nullptr;
  unsigned char* sample_staging_ = nullptr;
  float* decode_workspace_ = nullptr;
  size_t decode_workspace_bytes_ = 0;
  unsigned char* meta_ = nullptr;     // device metadata at the largest sizes
  unsigned char* staging_ = nullptr;  // pinned, same size
};

}  // namespace servelab::engine_cuda
