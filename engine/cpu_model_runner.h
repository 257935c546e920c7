#pragma once
// The CPU reference ModelRunner: float32 throughout, Eigen GEMMs for the projections and
// the kernels/ CPU twins for everything else, on one thread (Eigen's own threading is
// off unless the build enables OpenMP).
//
// One step packs the plan's non-padding seqs into T tokens and runs
//   embed -> per layer: [fused add +] RMSNorm -> q, k, v (+ bias) -> RoPE -> WriteKvCache
//   -> PagedPrefillAttention over the whole pack (a decode is a chunk of one) -> o_proj
//   -> fused add + RMSNorm -> gate_up -> SiluAndMul -> down (a mixture of experts: router
//   -> top-k softmax -> per chosen expert, its gathered rows through gate_up, SiluAndMul,
//   down, added back weighted; Qwen2-MoE's gated shared expert on every row)
//   -> final fused add + RMSNorm and LM head on the emitting seqs' last rows only.
//
// Memory: the device pool is K and V per layer, [num_blocks, block_size, kv_heads,
// head_dim] f32 each; the host swap pool is separate arrays of the same shape with
// num_cpu_blocks blocks. Activations are members, grown to the largest step seen and
// reused (no allocation per step once warm).
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model_runner.h"
#include "engine/model_weights.h"
#include "engine/step_pack.h"

namespace servelab {

struct CpuRunnerOptions {
  int32_t block_size = 16;  // tokens per KV block (must match the scheduler's)
  // Device pool: num_blocks when > 0, else as many blocks as kv_cache_bytes holds
  // (bytes / (2 * layers * block_size * kv_heads * head_dim * 4)). Default 256 MiB.
  int32_t num_blocks = 0;
  int64_t kv_cache_bytes = int64_t{256} << 20;
  // Host swap pool: num_cpu_blocks when > 0, else as many blocks as swap_space_bytes
  // holds (0 = no swap space).
  int32_t num_cpu_blocks = 0;
  int64_t swap_space_bytes = 0;
};

class CpuModelRunner final : public ModelRunner {
 public:
  // InvalidArgument when the options give no device block or a block size < 1.
  static StatusOr<std::unique_ptr<CpuModelRunner>> Create(
      std::shared_ptr<const ModelWeights> weights, const CpuRunnerOptions& options);

  std::string_view Name() const override { return "cpu"; }
  const ModelConfig& Config() const override { return weights_->config; }
  KvCapacity Capacity() const override { return capacity_; }
  void SwapOut(std::span<const BlockCopy> copies) override;
  void SwapIn(std::span<const BlockCopy> copies) override;
  Status Execute(const StepPlan& plan, const TokenStore& tokens,
                 std::vector<float>& logits) override;
  void SetOpTimer(OpTimer* timer) override { timer_ = timer; }
  std::optional<ExpertsRun> LastRouting() const override;
  // A mixture of experts' MLP is one op, moe_mlp (core/op.h).
  bool ProfilesOps() const override { return true; }

  // One layer's device K or V cache: [num_blocks, block_size, kv_heads, head_dim] f32.
  std::span<const float> KCache(int32_t layer) const { return k_cache_[layer]; }
  std::span<const float> VCache(int32_t layer) const { return v_cache_[layer]; }
  // Floats in one block of one layer's K (or V) cache.
  int64_t BlockFloats() const { return block_floats_; }

 private:
  // Times the ops of a step when a timer is set: each Lap(op) charges op with the time
  // since the previous lap.
  class Laps {
   public:
    explicit Laps(OpTimer* timer);
    void Lap(Op op);

   private:
    OpTimer* timer_;
    int64_t last_ns_ = 0;
  };

  CpuModelRunner(std::shared_ptr<const ModelWeights> weights, const KvCapacity& capacity);
  void Layer(int32_t index, int32_t num_tokens, Laps& laps);
  // out [rows, h] = down(silu(gate x) * up x) for x [rows, h] (out may be x's buffer),
  // lapping its three ops when `laps` is given.
  void SwiGlu(const float* x, int32_t rows, const SwiGluWeights& mlp, std::vector<float>& out,
              Laps* laps = nullptr);
  // hidden_ [T, h] <- the layer's mixture of experts applied to it.
  void MixtureOfExperts(const LayerWeights& w, int32_t num_tokens);
  static void CopyBlocks(std::span<const BlockCopy> copies,
                         const std::vector<std::vector<float>>& from,
                         std::vector<std::vector<float>>& to, int32_t from_blocks,
                         int32_t to_blocks, int64_t block_floats);

  std::shared_ptr<const ModelWeights> weights_;
  KvCapacity capacity_;
  int64_t block_floats_ = 0;                           // block_size * kv_heads * head_dim
  std::vector<float> inv_freq_;                        // [head_dim / 2]
  std::vector<std::vector<float>> k_cache_, v_cache_;  // [layers][num_blocks * block_floats]
  std::vector<std::vector<float>> host_k_, host_v_;    // [layers][num_cpu_blocks * ...]

  StepPack pack_;  // the packed step (reused)
  OpTimer* timer_ = nullptr;
  // The last step's routing, summed over its MoE layers.
  ExpertsRun routing_;
  int32_t routed_layers_ = 0;
  // Activations (reused; std::vector so a smaller step keeps the capacity), row-major.
  std::vector<float> hidden_, residual_;            // [T, h]
  std::vector<float> q_, attn_;                     // [T, heads * d]
  std::vector<float> k_, v_;                        // [T, kv_heads * d]
  std::vector<float> gate_up_;                      // [T, 2I]
  std::vector<float> act_;                          // [T, I]
  std::vector<float> last_hidden_, last_residual_;  // [E, h]
  // MoE layers: router logits [T, experts], each token's k experts and weights [T, k],
  // the slots grouped by expert, one expert's gathered rows and output [rows, h], the sum.
  std::vector<float> router_logits_, topk_weights_;
  std::vector<int32_t> topk_ids_, expert_offsets_, expert_slots_;
  std::vector<float> expert_in_, expert_out_, moe_out_;  // [rows, h], [rows, h], [T, h]
};

}  // namespace servelab
