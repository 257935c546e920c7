#pragma once
// The CUDA ModelRunner: the CPU reference's forward pass (cpu_model_runner.h) on one GPU,
// bf16 weights, activations and KV cache, f32 accumulation everywhere (cuBLAS GEMMs with
// CUBLAS_COMPUTE_32F; kernels/cuda/ for the rest) and f32 logits. Its parts own their
// state, each in its own file: device_context.h (stream, cuBLAS), device_weights.h,
// device_kv_pool.h (KV cache, swap pool, block copies), device_step.h (activations, the
// forward pass, sampling), decode_graphs.h.
//
// Step (one stream):  upload the packed step (one host-to-device copy from pinned memory)
//   -> embed -> per layer: [fused add +] RMSNorm -> one q|k|v GEMM (stacked weights; +
//   bias) -> RoPE on q and k, k and v into the paged cache, in one kernel -> attention ->
//   o_proj -> fused add + RMSNorm -> gate_up GEMM -> SiLU*mul -> down GEMM -> final fused
//   add + RMSNorm and LM head on the emitting rows. Nine launches per layer, plus the
//   split-KV merge in long decodes and the bias adds of models that have biases.
// Attention: PagedDecodeAttention (split-KV) when every seq brings one token, else
// PagedPrefillAttention over the whole pack (decodes are chunks of one).
//
// CUDA graphs: a step whose seqs all bring one token and all emit (pure decode) replays a
// graph for its padded batch size (1, 2, 4, 8, then multiples of 8, up to max_num_seqs)
// and its context bucket (the smallest power of two >= 512 tokens covering the longest
// context, up to max_model_len), which fixes the decode kernel's partition count and the
// block-table stride. All are captured when the runner is made, as vLLM does (each after
// one eager warm-up pass), so no timed step pays for a capture. Padding rows have context
// 1 over block 0, no KV write (slot -1), and their logits are ignored.
//
// Memory (vLLM's rule): after the weights, activations and graph buffers are allocated,
// the KV pool takes what is left of total memory x memory_utilization (less 256 MiB kept
// for capturing graphs when they are on), unless num_blocks fixes it. The swap pool is pinned host memory; block copies are cudaMemcpyAsync on the
// step's stream, so they precede the step's kernels.
//
// Weights come from a loaded checkpoint (ModelWeights, f32 on the host, rounded to bf16
// once) or are generated on the device from a seed for any architecture (CreateRandom):
// full-size timing (Llama-3-8B, 16 GB) needs no file and no host memory.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "engine/model_runner.h"
#include "engine/model_weights.h"

namespace servelab {

struct CudaRunnerOptions {
  int32_t device = 0;
  int32_t block_size = 16;           // tokens per KV block (must match the scheduler's)
  int32_t num_blocks = 0;            // > 0: exactly this many device KV blocks
  double memory_utilization = 0.9;   // else: the pool fills total memory x this, in (0, 1]
  int64_t swap_space_bytes = 0;      // pinned host swap pool; 0 = no swap space
  int32_t max_num_seqs = 256;        // activations and decode graphs are sized for these
  int32_t max_num_batched_tokens = 8192;
  int32_t max_model_len = 0;         // 0: the model's max_position_embeddings
  bool cuda_graphs = true;
};

// Whether a CUDA device can be used; otherwise `why` says why (no driver, no device).
bool CudaDeviceUsable(std::string* why);

class CudaModelRunner final : public ModelRunner {
 public:
  // Copies `weights` to the device as bf16. Errors: no usable device, an architecture the
  // kernels do not support (head_dim not 64/128/256, more than 8 query heads per KV head),
  // out of device memory, invalid options.
  static StatusOr<std::unique_ptr<CudaModelRunner>> Create(
      std::shared_ptr<const ModelWeights> weights, const CudaRunnerOptions& options);
  // Reads `dir` (config.json + safetensors, single or sharded) straight to the device:
  // BF16 tensors are copied as they are, F32/F16 rounded to bf16 one tensor at a time, so
  // the host never holds a float32 copy of the model (the same bits as Create over
  // LoadModelWeights). Errors name the file and tensor as the loader's do.
  static StatusOr<std::unique_ptr<CudaModelRunner>> CreateFromCheckpoint(
      const std::filesystem::path& dir, const CudaRunnerOptions& options);
  // Seeded random weights generated on the device for `config` (no checkpoint): linear
  // weights and embeddings mean 0, `init_std`; norm weights mean 1, `init_std`.
  static StatusOr<std::unique_ptr<CudaModelRunner>> CreateRandom(
      const ModelConfig& config, uint64_t seed, double init_std, const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  std::string_view Name() const override { return "cuda"; }
  bool FirstShapesCostMore() const override { return true; }
  const ModelConfig& Config() const override;
  KvCapacity Capacity() const override;
  void SwapOut(std::span<const BlockCopy> copies) override;
  void SwapIn(std::span<const BlockCopy> copies) override;
  Status Execute(const StepPlan& plan, const TokenStore& tokens,
                 std::vector<float>& logits) override;
  // Sampling runs on the device; only token ids come back. temperature <= 0: GreedySample
  // (argmax, lowest id on ties: the host Sampler's tokens). Otherwise TopPSample with each
  // seq's uniform draw: the rule of kernels/top_p_sample.h (fixed-point weights, tie
  // groups kept whole, inverse CDF in id order), which keeps the same token sets as the
  // host Sampler but walks them in another order, so its draws differ token by token
  // while following the same distribution.
  bool SamplesOnDevice(const SamplingParams& params) const override;
  Status ExecuteAndSample(const StepPlan& plan, const TokenStore& tokens,
                          const SamplingParams& params, std::span<const double> uniforms,
                          std::vector<int32_t>& token_ids) override;
  // With a timer, every step runs eagerly (a captured decode graph cannot be split into
  // ops) with a CUDA event after each op; the op times reach the timer when the step has
  // synchronized. The fused RoPE + KV-cache write is reported as rope.
  void SetOpTimer(OpTimer* timer) override;
  bool ProfilesOps() const override { return true; }
  bool OpTimerAltersSteps() const override { return true; }
  // The pure-decode step's graph: DecodeGraphBatch(seqs, max_num_seqs) rows, the bucket
  // of its longest context (kernels/decode_graph_shape.h).
  std::optional<DecodeGraphRun> LastDecodeGraph() const override;

  // For benchmarks and reports.
  std::string DeviceName() const;
  int64_t WeightBytes() const;        // bf16 bytes of every weight tensor (tied: once)
  int64_t KvBytesPerToken() const;    // K and V of every layer, bf16
  int32_t NumCapturedGraphs() const;

  struct Impl;  // the device state; defined in the .cc only

 private:
  explicit CudaModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace servelab
