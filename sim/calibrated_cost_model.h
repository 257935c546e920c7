#pragma once
// `cost_model: {type: calibrated, path: MODEL.yaml}`: a step's time from per-op models
// fitted to measured profiles (`servelab calibrate`; sim/calibration.h), op by op in the
// step's own decomposition (sim/op_model.h):
//
//   per layer: input_norm, qkv_proj, rope, kv_cache_write, attention, o_proj,
//              post_attention_norm, gate_up_proj, silu_and_mul, down_proj (T tokens), two
//              all-reduces when tp > 1, and any op the model fitted that servelab's step
//              does not have on its own (a separate residual_add, as Vidur profiles vLLM);
//   attention: one kernel for the step, as servelab's engines launch it: decode
//              attention over every sequence's context when each brings one token, else
//              prefill attention over every chunk (a decode is a chunk of one); a decode
//              fit in the split_kv form counts the batch's FlashAttention grid, its KV
//              split over the longest sequence (vLLM's max_seqlen_k), on the
//              deployment GPU's SMs (hardware.gpu.sm_count; required then);
//   per step:  embedding (T), final_norm, lm_head and sampling (E emitting rows), the
//              (pp - 1) stage transfers of the roofline (each on the link between its
//              stages, the network between nodes), and a fixed step overhead.
//   all-reduce: the fit's (a profile measures one node's), or when a TP group spans
//              nodes the roofline's over the network.
//   mixture of experts (sim/expert_routing.h): a MoE layer's MLP is the router (the
//              roofline's GEMM, replicated over the TP group), a shared expert if the
//              model has one (gate_up_proj, silu_and_mul, down_proj at its width over T
//              rows), and the routed experts as vLLM's fused MoE runs them: one grouped
//              GEMM for gate|up and one for down, each with gate_up_proj's or down_proj's
//              coefficients (one fixed cost a kernel, the weights of the experts touched,
//              every expert's rows in whole blocks of vLLM's fused MoE kernel,
//              FusedMoeBlockRows), silu_and_mul
//              over the token x expert rows between them; under expert parallelism, the
//              busiest GPU's rows and experts, and the all-to-all around the layer
//              instead of its all-reduce (the roofline's). Dense layers (DeepSeek's first
//              ones) keep the dense MLP. A model that fits moe_mlp (the engine's profile
//              of a MoE model: the whole MLP as the runner ran it, with a cost per expert
//              run) takes that for every MoE layer's MLP instead.
//              Each grouped GEMM is one fused kernel: the fit's fixed cost, and the
//              max() of its weight reads and its padded FLOPs (a fused kernel overlaps
//              them) at the fit's compute efficiency and at the memory efficiency of the
//              fit's matrix-vector kernel (its single-row fit: the same weights read at
//              one row, memory-bound) where it has one. A dense fit's own memory term
//              holds only with its own form and row tile: the A100 and H100 GEMM fits are
//              additive, stream weights at 1.4-2.0x the HBM peak and make up the rest in
//              FLOPs padded to 64 or 128 rows. Taken as they are with 16-row blocks they
//              stream expert weights faster than the HBM can (Mixtral at 1 req/s on the
//              H100 fit: TPOT 34% below the roofline's); with their own 128-row tiles a
//              model of 256 experts pads each expert's few rows to 128 (DeepSeek-V3's
//              TPOT 80% above the roofline's, against 65% this way, 6% once every fixed
//              cost is set to 0: its 61 layers' ~15 kernels are what it adds).
//   latent attention (MLA, DeepSeek): the attention itself is the roofline's; its GEMMs
//              (the query's and the latent's down- and up-projections, the absorbed one)
//              take qkv_proj's coefficients at their shapes, its output o_proj's; rope and
//              the KV write over the latent.
//
// An op the model fitted takes its fit, on the deployment's GPU peaks (efficiencies and
// fixed costs carry over from the GPU it was fitted on); the others take the datasheet
// roofline's form and efficiencies with no fixed cost (sampling, which the roofline
// counts in its step overhead, costs nothing unless fitted). Describe() says which.
//
// Parameters:
//   path              MODEL.yaml, relative to the experiment's folder (required)
//   step_overhead_ms  >= 0; default the model's fitted step overhead, else the
//                     roofline's 0.5 ms
//   decode_step_overhead_ms  a decode-only step's, in [-1e6, 1e6] (negative: a step
//                     replayed as a CUDA graph takes less than its ops timed one by one);
//                     default the model's decode_step_overhead_us, else step_overhead_ms
//   split_kv_length   tokens; with a split_kv decode fit, the KV length FlashAttention
//                     splits: 0 (default) the batch's longest sequence (vLLM's
//                     max_seqlen_k), or a fixed allocation (Vidur's profiler gave it
//                     max_model_len)
//   gemm_corrections  true (default) or false: the GEMMs the model corrects at this
//                     deployment's weight shapes (qkv_proj, o_proj, gate_up_proj,
//                     down_proj, lm_head; sim/gemm_corrections.h) take the measured /
//                     fitted ratio at their rows, on the model's own device only (a CPU
//                     fit's always) and with 16-bit floating-point weights and
//                     activations (the profiles'); false: the fitted form alone. A MoE
//                     model's shared and routed experts and latent attention's GEMMs take
//                     the form alone. Read (and recorded) when the model has corrections.
//                     The fitted step overhead was fitted with them applied
//   decode_graphs     true (default) or false: with a model fitted on servelab's CUDA
//                     runner replaying its decode steps as CUDA graphs (MODEL.yaml's
//                     `decode_graphs: true`), a decode-only step every sequence of which
//                     emits is priced as the graph runs it (kernels/decode_graph_shape.h):
//                     every op over the graph's padded rows (1, 2, 4, then multiples of 8,
//                     at most scheduler.max_num_seqs), the padding rows attending one
//                     position each, and decode attention's partitions chosen and launched
//                     for the context bucket of the longest context (512 tokens and up by
//                     powers of two, at most the context served); false: the step's own
//                     rows and contexts. With it, a decode-only step the runner runs
//                     eagerly (a sequence that does not emit) takes step_overhead_ms, not
//                     the graphs' decode overhead. Read (and recorded) when the model has it
//   after_prefill     true (default) or false: with a model that fitted the first decode
//                     steps after a prefill step (MODEL.yaml's `after_prefill`,
//                     sim/after_prefill.h), a decode-only step k steps after a step with
//                     prompt tokens (StepPlan::steps_since_prefill) takes its time x (1 +
//                     slowdown(its sequences) x exp(-(k - 1) / decay_steps)); false: every
//                     decode step settled. Read (and recorded) when the model has it
//   expert_imbalance, routing_skew, routing_locality, routing_favourites
//                     MoE models: as the roofline's (ExpertRoutingOptions); the skew,
//                     locality and favourites default to those MODEL.yaml's `routing`
//                     counted on a model of the deployment's MoE shape (experts, per
//                     token, hidden size, expert width), else 0, 0 and 1 (uniform,
//                     independent tokens)
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/calibration.h"
#include "sim/cost_model.h"
#include "sim/expert_routing.h"
#include "sim/roofline_cost_model.h"

namespace servelab {

class CalibratedCostModel final : public CostModel {
 public:
  CalibratedCostModel(const CalibratedModel& model, const std::string& path,
                      const DeploymentSpec& deployment, double step_overhead_ms,
                      int64_t split_kv_length = 0, const ExpertRoutingOptions& routing = {},
                      bool gemm_corrections = true, bool decode_graphs = true);

  std::string_view Name() const override { return "calibrated"; }
  TimeNs StepTime(const StepPlan& plan) const override;
  std::string Describe() const override { return description_; }
  std::optional<ExpertsRun> ExpectedRouting(const StepPlan& plan) const override {
    if (!moe_) return std::nullopt;
    return routing_.Expected(plan);
  }
  // With decode_graphs, a pure-decode step whose sequences all emit: the graph of its
  // padded batch (at most the deployment's max_num_seqs) launched for the bucket of its
  // longest context (at most the context served), as PartsOf prices it.
  std::optional<DecodeGraphRun> ExpectedDecodeGraph(const StepPlan& plan) const override { return GraphOf(plan); }
  // Pipeline parallelism: each stage its own layers (the first stage also the embedding,
  // the last the final norm, LM head and sampling), its share of the step overhead and the
  // transfer to the next stage; summing to StepTime exactly.
  void StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const override;
  // Seconds, for tests: the step without its overhead.
  double OpsSeconds(const StepPlan& plan) const;
  // Whether a deployment needs the roofline for what no profile covers (below), and so
  // must pass RooflineCostModel::Validate.
  static bool NeedsRoofline(const DeploymentSpec& deployment);

 private:
  const OpCoefficients& Of(Op op) const { return coefficients_[static_cast<size_t>(op)]; }
  // An op at the deployment's own shape (shape_): its coefficients' time, times its GEMM
  // correction where it has one.
  double Seconds(Op op, const OpWork& work) const;
  // One step's parts: every layer's (attention, its side ops and all-reduce; a dense
  // model's whole layer), a dense layer's MLP and a MoE layer's (each with its collective)
  // in MoE and MLA models, the first stage's per-step ops and the last stage's.
  struct StepParts {
    double tokens = 0;
    double layer_s = 0;
    double dense_mlp_s = 0;
    double moe_mlp_s = 0;
    double first_s = 0;  // embedding
    double last_s = 0;   // final_norm, lm_head, sampling
    bool decode_only = false;  // every seq brings one token (padding costed as one)
    bool graph = false;         // run as the runner's decode graph (decode_graphs_)
    int64_t graph_padding = 0;  // the rows the graph adds to the step's
    int32_t graph_bucket = 0;   // the context bucket it is launched for
  };
  // The graph `plan` runs as (GraphOf's rule): with decode_graphs_, a step whose
  // sequences all bring one token and emit (static batching's padding counted as such).
  std::optional<DecodeGraphRun> GraphOf(const StepPlan& plan) const;
  StepParts PartsOf(const StepPlan& plan) const;
  // A decode-only step's after_prefill_ factor by its place and sequences; 1 otherwise.
  double AfterPrefillFactor(const StepPlan& plan, const StepParts& p) const;
  double OpsSeconds(const StepParts& p) const;
  // `dense` dense layers' and `moe` MoE layers' time (a dense model's layers all dense).
  static double LayersSeconds(const StepParts& p, double dense, double moe);
  // One all-reduce over the TP group: its fit (or the roofline's form on the link), or
  // the roofline's over the network when the group spans nodes.
  double AllReduceSeconds(double tokens) const;
  // The MoE layers' parts and latent attention's (the header's note), after the ops'
  // coefficients are set; the per-layer ops outside both.
  void SetUpMixtureOfExperts(const DeploymentSpec& d, const ExpertRoutingOptions& routing);
  void SetUpLatentAttention(const DeploymentSpec& d);
  void SetUpAttentionSide();
  // One layer's attention from its fit: decode or prefill, the split-KV grid when fitted;
  // a step run as a decode graph (p.graph), with the graph's padding rows and its bucket.
  double FittedAttentionSeconds(const StepPlan& plan, bool all_single, const StepParts& p) const;
  // Adds the prefill kernel's grid term (paged_prefill_grid.h) for plan.seqs[first, end),
  // one launch; nothing when the fit prices no token walked.
  void AddPrefillGridWork(OpWork& work, const StepPlan& plan, size_t first) const;
  // One MoE layer's MLP over a step's tokens (the header's note), without its all-to-all.
  double MoeMlpSeconds(const RoutedTokens& step) const;

  OpShape shape_;
  int32_t layers_ = 0;
  int32_t split_kv_sms_ = 0;  // > 0: decode attention counts the split-KV grid on these SMs
  // The GPU's SMs when a fit counts servelab's attention kernels' grids; the blocks an SM
  // runs at once in each: decode (paged_decode_grid.h; > 0: a mixed step's leading decode
  // rows go to the decode kernel) and prefill (paged_prefill_grid.h; 0: its longest walk).
  int32_t paged_grid_sms_ = 0;
  int32_t paged_grid_resident_ = 0;
  int32_t prefill_grid_resident_ = 0;
  int64_t split_kv_length_ = 0;  // the KV length it splits; 0: the longest sequence's
  // Decode steps priced as servelab's CUDA graphs run them (the header's decode_graphs),
  // with the deployment's limits on the graphs' rows and context (0: none).
  bool decode_graphs_ = false;
  // A decode-only step's factor by its place after a prefill step (none: slowdown 0).
  AfterPrefill after_prefill_;
  int32_t graph_max_seqs_ = 0;
  int32_t graph_max_model_len_ = 0;
  std::vector<OpCoefficients> coefficients_;  // by Op
  std::vector<GemmCorrection> corrections_;  // by Op, at shape_; no rows: none
  std::vector<Op> per_layer_rows_;  // token-scaled per-layer ops
  std::vector<Op> per_step_rows_;   // T-scaled: embedding
  std::vector<Op> per_step_emit_;   // E-scaled: final_norm, lm_head, sampling
  // The roofline of the deployment, for what no profile covers: latent attention, a MoE
  // layer's router and its all-to-all, pipeline stage transfers (on the link between the
  // stages: NVLink or the network), and a TP group's all-reduces when it spans nodes
  // (allreduce_on_network_). Made when NeedsRoofline().
  std::unique_ptr<RooflineCostModel> roofline_;
  bool allreduce_on_network_ = false;
  size_t pipeline_stages_ = 1;
  std::vector<int32_t> stage_dense_layers_, stage_moe_layers_;  // per stage, when pp > 1
  // Mixture of experts: the layers of each kind; the per-layer ops outside the MLP and its
  // all-reduce; the routed experts' routing and shape, the shared expert's; the grouped
  // gate|up and down GEMMs' coefficients as one fused kernel each (the header's note).
  bool moe_ = false;
  double dense_layers_ = 0, moe_layers_ = 0;
  std::vector<Op> attention_side_rows_;
  ExpertRouting routing_;
  OpShape expert_shape_, shared_shape_;
  bool shared_expert_ = false;
  bool moe_mlp_fitted_ = false;  // the model fits moe_mlp: it replaces the parts below
  OpCoefficients fused_gate_up_, fused_down_;
  // Multi-head latent attention: its GEMMs (k, n), the output projection last.
  bool mla_ = false;
  std::vector<std::pair<double, double>> latent_gemms_;
  double overhead_s_ = 0;
  double decode_overhead_s_ = 0;  // a decode-only step's (the model's decode_step_overhead_us)
  std::string description_;
};

StatusOr<std::unique_ptr<CostModel>> MakeCalibratedCostModel(ParamReader& params,
                                                             const DeploymentSpec& deployment);

}  // namespace servelab
