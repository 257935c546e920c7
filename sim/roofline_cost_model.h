#pragma once
// The roofline cost model: one iteration's time from the model's shapes and the GPU's
// datasheet peaks. Every op costs
//
//   max(FLOPs / (peak * efficiency), bytes / (bandwidth * memory_efficiency))
//
// and the step is the sum over ops, plus communication and a fixed overhead.
//
// Per decoder layer, with T = Σ new tokens (padding seqs count 1), tp-way splits, per GPU:
//   GEMMs  QKV [T,h]x[h,q+2kv]/tp, O [T,q/tp]x[q/tp,h], gate|up [T,h]x[h,2I]/tp,
//          down [T,I/tp]x[I/tp,h]: FLOPs 2*T*K*N, bytes K*N*weight + T*(K+N)*act.
//   attention, PER SEQUENCE (c cached, n new tokens): causal pairs p = n*c + n(n+1)/2,
//          FLOPs 4*(heads/tp)*head_dim*p (QK^T and PV), bytes (c+n)*2*kv_heads_per_gpu*
//          head_dim*kv (KV read once) + 2*n*(q/tp)*act (Q in, O out). Summing each seq's
//          own max keeps a long decode memory-bound next to a compute-bound prefill,
//          which a batch mean would blend away.
//   elementwise, memory-bound (bytes only): 2 fused residual-add + RMSNorms, RoPE on q
//          and k, SiLU*mul, and the KV-cache write.
//   tensor parallel: 2 ring all-reduces of [T,h] act per layer, each
//          2*(tp-1)/tp * T*h*act / (link * interconnect_efficiency) + allreduce_latency.
// Multi-head latent attention (MLA, DeepSeek): the GEMMs are the query's down (replicated
//          over TP) and up projections, the latent's down-projection (replicated), its
//          up-projections to keys and values absorbed into the query and the output (one
//          [T, kv_lora_rank] x [kv_lora_rank, heads/tp x (nope + v)] GEMM), and o. Decode
//          attends in the latent space: 2 (heads/tp)(kv_lora_rank + rope + kv_lora_rank)
//          FLOPs per pair, the whole latent read once (kv_lora_rank + rope per token, not
//          split by TP). A prefill chunk attends at full width, 2 (heads/tp)(qk + v) FLOPs
//          per pair, after up-projecting each cached token's latent (GEMM rate).
// Once per step: embedding gather and final norm over T tokens (elementwise), and the LM
// head over E rows, E = seqs that emit a token (padding seqs count): FLOPs 2*E*h*V/tp,
// bytes h*V/tp*weight + E*(h*act + V/tp*4) (fp32 logits).
//
// Pipeline parallel: the L layers split into pp stages of ceil(L/pp) layers (the last
// takes the rest). A batch's latency is the time of all L layers plus (pp-1)
// stage-to-stage transfers of [T,h] activations (T*h*act / (link *
// interconnect_efficiency) + allreduce_latency each); StageTimes splits it by stage, and
// the driver keeps up to pp batches in flight, each stage busy with a different one.
//
// Precision: GEMMs and the LM head run at the tensor peak of the weight dtype: fp8 on a
// GPU with FP8 tensor cores uses fp8_tflops; fp32 uses fp32_tflops (bf16 if 0); bf16,
// fp16, int8, int4 (and fp8 without FP8 units) use bf16_tflops: weight-only quantization
// streams weights at their width but computes in bf16. Attention runs at the activation
// dtype's peak by the same rule.
#include <array>
#include <vector>
#include <string_view>

#include "core/status.h"
#include "sim/cost_model.h"
#include "sim/expert_routing.h"

namespace servelab {

// `cost_model: {type: roofline, ...}`: each op costs max(FLOPs / (peak * gemm or
// attention efficiency), bytes / (bandwidth * memory_efficiency)).
struct RooflineOptions {
  double gemm_efficiency = 0.75;         // fraction of dense tensor peak a GEMM reaches, (0, 1]
  double attention_efficiency = 0.5;     // fraction of tensor peak attention FLOPs reach, (0, 1]
  double memory_efficiency = 0.85;       // fraction of peak DRAM bandwidth streams reach, (0, 1]
  double interconnect_efficiency = 0.8;  // fraction of link bandwidth all-reduce reaches, (0, 1]
  double allreduce_latency_us = 10.0;    // fixed cost per all-reduce (launch, sync), >= 0
  double step_overhead_ms = 0.5;         // per iteration: scheduling, launches, sampling, >= 0
  // MoE models: how tokens land on experts (expert_imbalance, routing_skew,
  // routing_locality, routing_favourites: ExpertRoutingOptions).
  ExpertRoutingOptions routing;
};

// Where one step's time goes, in seconds. total_s() is what StepTime rounds to ns.
struct RooflineBreakdown {
  double gemm_s = 0;           // the projection GEMMs (qkv, o, the MLP or the experts), all layers
  double attention_s = 0;      // per-sequence attention, all layers
  double elementwise_s = 0;    // norms, adds, RoPE, SiLU*mul, KV write, embedding, final norm
  double lm_head_s = 0;        // logits for the emitting rows
  double communication_s = 0;  // TP all-reduces, PP stage transfers, EP all-to-alls
  double overhead_s = 0;       // step_overhead_ms

  double total_s() const {
    return gemm_s + attention_s + elementwise_s + lm_head_s + communication_s + overhead_s;
  }
};

// Dense tensor peak, TFLOP/s, that math in `dtype` runs at on `gpu` (rule above).
double TensorPeakTflops(const GpuSpec& gpu, DType dtype);

// Of a replica's pp - 1 stage boundaries, those between two nodes when its tp x pp GPUs
// fill nodes of `gpus_per_node` in order, stage s on GPUs [s tp, (s + 1) tp): TP 4, PP 8
// on 8-GPU nodes crosses 3 (after stages 1, 3 and 5).
int32_t StageBoundariesCrossingNodes(int32_t tp, int32_t pp, int32_t gpus_per_node);
// Whether some stage's TP group spans two nodes (TP 16 on 8-GPU nodes; TP 3 on 4-GPU
// nodes, whose second group takes GPUs 3, 4, 5).
bool TensorGroupsCrossNodes(int32_t tp, int32_t pp, int32_t gpus_per_node);

class RooflineCostModel : public CostModel {
 public:
  // InvalidArgument when the deployment cannot be costed: non-positive shapes or GPU
  // peaks, tp or pp < 1, tp not dividing the attention heads, pp > layers, or tp/pp > 1
  // with no interconnect bandwidth.
  static Status Validate(const DeploymentSpec& deployment);

  // REQUIRES: Validate(deployment).ok().
  RooflineCostModel(const RooflineOptions& options, const DeploymentSpec& deployment);

  std::string_view Name() const override { return "roofline"; }
  TimeNs StepTime(const StepPlan& plan) const override;
  // One pass over plan.seqs; allocates nothing. A plan with no seqs (swaps only) costs
  // the overhead alone.
  RooflineBreakdown Breakdown(const StepPlan& plan) const;
  // One layer's attention (Breakdown's attention_s over the layers): the calibrated cost
  // model's for latent attention, which no profile covers.
  double AttentionLayerSeconds(const StepPlan& plan) const;
  // One MoE layer's router GEMM, and its all-to-all dispatch and combine under expert
  // parallelism (0 without), over `tokens` tokens: the calibrated model's too.
  double RouterSeconds(double tokens) const;
  double AllToAllSeconds(double tokens) const;
  bool TimesDecodeBatches() const override;
  std::optional<ExpertsRun> ExpectedRouting(const StepPlan& plan) const override {
    if (num_moe_layers_ == 0) return std::nullopt;
    return routing_.Expected(plan);
  }
  TimeNs DecodeStepTime(int64_t seqs, int64_t context_tokens) const override;
  // Each stage its own layers' share of the layer work (GEMMs, attention, elementwise,
  // TP and EP collectives) and of the step overhead (each stage's GPUs launch their own
  // kernels), the transfer to the next stage over the link between them; the last stage
  // also the LM head.
  void StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const override;
  // Where the replica's collectives run: the TP (= EP) groups' over the network when one
  // spans nodes; how many PP stage boundaries are between nodes.
  bool TensorParallelCrossesNodes() const { return tp_crosses_nodes_; }
  int32_t StageBoundariesOnTheNetwork() const { return stage_boundaries_crossing_nodes_; }
  // One ring all-reduce of `tokens` hidden vectors over the TP group, on its link (the
  // network when the group spans nodes); 0 without TP. The calibrated cost model's when
  // its group spans nodes, where no single-node profile measured it.
  double AllReduceSeconds(double tokens) const;
  // The layers of each pipeline stage, and the transfer of `tokens` hidden vectors over
  // stage boundary `boundary` (after stage `boundary`, < pp - 1), on the link between them.
  const std::vector<int32_t>& StageLayers() const { return stage_layers_; }
  double StageTransferSeconds(size_t boundary, double tokens) const {
    return tokens * boundary_s_per_token_[boundary] + boundary_latency_s_[boundary];
  }

 private:
  // What a step's time depends on: its tokens, its LM head rows, and its attention with
  // each seq at its own bound (compute: its causal pairs; memory: its context and new
  // tokens, summed as integers so that the sum does not depend on the seqs' order).
  struct Batch {
    double tokens = 0;
    double emitting = 0;
    double compute_pairs = 0;
    int64_t memory_context = 0;
    int64_t memory_new = 0;
    double prefill_s = 0;  // MLA: the prefill chunks' attention, each at its own bound
    RoutedTokens routed;   // MoE: the tokens as routing draws
  };
  Batch BatchOf(const StepPlan& plan) const;
  double AttentionLayerSeconds(const Batch& batch) const;
  RooflineBreakdown BreakdownOf(const Batch& batch) const;

  // One GEMM of a layer, per GPU, as seconds at the configured rates.
  struct Gemm {
    double compute_s_per_token = 0;  // 2*K*N FLOPs / (peak * gemm_efficiency)
    double weight_s = 0;             // K*N*weight bytes / (bw * memory_efficiency)
    double act_s_per_token = 0;      // (K+N)*act bytes / (bw * memory_efficiency)
  };
  static double GemmSeconds(const Gemm& g, double tokens);  // at the step's `tokens`
  // Every layer: qkv, o; MLA: the query's down and up (or direct) projection, the
  // latent's down-projection, its absorbed up-projections, o.
  std::vector<Gemm> attention_gemms_;
  bool mla_ = false;
  double prefill_s_per_pair_ = 0;           // MLA prefill: one layer, compute side
  double prefill_s_per_cached_token_ = 0;   // MLA prefill: up-projecting one cached latent
  double prefill_qo_s_per_new_token_ = 0;   // MLA prefill: Q in + O out of one new token
  std::array<Gemm, 2> dense_mlp_gemms_;  // gate|up, down: the dense layers
  double num_layers_ = 0;             // L (all stages)
  double num_dense_layers_ = 0;       // L for a dense model; first_k_dense_replace for MoE
  double num_moe_layers_ = 0;
  // One MoE layer: the router and the shared expert (dense GEMMs over every token), and
  // the routed experts, each token-row (a token x one of its experts) costed at the
  // expert GEMMs' rates, the weights of the experts touched read once.
  std::array<Gemm, 3> moe_dense_gemms_;  // router, shared gate|up, shared down
  ExpertRouting routing_;             // MoE: RooflineOptions::routing
  int32_t expert_parallel_ = 1;
  double all_to_all_s_per_row_ = 0;   // EP: one MoE layer's dispatch + combine, per row
  double all_to_all_latency_s_ = 0;   // EP: one MoE layer's two collectives
  bool tp_crosses_nodes_ = false;     // the TP (= EP) group is larger than a node
  int32_t stage_boundaries_crossing_nodes_ = 0;
  double expert_compute_s_per_row_ = 0;
  double expert_act_s_per_row_ = 0;
  double expert_weight_s_ = 0;        // one expert's gate|up and down, per GPU
  double attention_s_per_pair_ = 0;   // one layer, compute side
  double kv_read_s_per_token_ = 0;    // one layer, one cached or new token's K and V
  double qo_s_per_new_token_ = 0;     // one layer, Q in + O out of one new token
  double elementwise_s_per_token_ = 0;  // all layers + embedding + final norm
  double expert_silu_s_per_row_ = 0;    // a routed expert's SiLU*mul, per GPU row
  Gemm lm_head_;                      // per emitting row
  double allreduce_s_per_token_ = 0;  // all layers' all-reduces, bandwidth part
  double allreduce_latency_s_ = 0;    // all layers' all-reduces, latency part
  double allreduce_call_s_per_token_ = 0;  // one all-reduce, bandwidth part
  double collective_latency_s_ = 0;        // one collective's latency
  double transfer_s_per_token_ = 0;   // all (pp-1) stage transfers, bandwidth part
  double transfer_latency_s_ = 0;     // all (pp-1) stage transfers, latency part
  // Per stage: its layers; per boundary (after stage s): its transfer, bandwidth and
  // latency parts.
  std::vector<int32_t> stage_layers_;
  std::vector<double> boundary_s_per_token_;
  std::vector<double> boundary_latency_s_;
  double overhead_s_ = 0;
};

// The registry's factory: reads RooflineOptions (unknown keys are errors) and validates
// the deployment.
StatusOr<std::unique_ptr<CostModel>> MakeRooflineCostModel(ParamReader& params,
                                                           const DeploymentSpec& deployment);

}  // namespace servelab
