#include "sim/calibrated_cost_model.h"

#include <algorithm>
#include <cstdio>

#include "core/params.h"
#include "core/text.h"
#include "kernels/decode_graph_shape.h"
#include "sim/model_file.h"
#include "sim/paged_decode_grid.h"
#include "sim/paged_prefill_grid.h"
#include "sim/roofline_cost_model.h"
#include "sim/split_kv_grid.h"

namespace servelab {
bool CalibratedCostModel::NeedsRoofline(const DeploymentSpec& d) {
  return d.model.IsMla() || d.model.IsMoe() || d.pipeline_parallel > 1 ||
         (d.tensor_parallel > 1 &&
          TensorGroupsCrossNodes(d.tensor_parallel, d.pipeline_parallel, d.gpus_per_node));
}

CalibratedCostModel::CalibratedCostModel(const CalibratedModel& model, const std::string& path,
                                         const DeploymentSpec& d, double step_overhead_ms,
                                         int64_t split_kv_length,
                                         const ExpertRoutingOptions& routing,
                                         bool gemm_corrections, bool decode_graphs)
    : split_kv_length_(split_kv_length),
      decode_graphs_(decode_graphs && model.decode_graphs),
      graph_max_seqs_(d.max_num_seqs),
      graph_max_model_len_(d.max_model_len) {
  shape_.model = d.model;
  shape_.tensor_parallel = d.tensor_parallel;
  shape_.weight_dtype = d.weight_dtype;
  shape_.activation_dtype = d.activation_dtype;
  shape_.kv_dtype = d.kv_dtype;
  layers_ = d.model.num_hidden_layers;
  dense_layers_ = d.model.NumDenseLayers();
  moe_layers_ = d.model.NumMoeLayers();
  // A CPU fit is in absolute units (its nominal device); a GPU fit carries its
  // efficiencies to the deployment's GPU.
  const GpuSpec fitted_gpu = model.device == "cpu" ? *DeviceSpec("cpu") : d.gpu;
  moe_mlp_fitted_ = d.model.IsMoe() && model.ops.count(Op::kMoeMlp) > 0;
  coefficients_.resize(AllOps().size());
  std::vector<std::string> fitted, roofline;
  for (const OpInfo& info : AllOps()) {
    auto it = model.ops.find(info.op);
    // moe_mlp: in MoE layers only (below).
    const bool has_fit = it != model.ops.end() && (info.op != Op::kMoeMlp || d.model.IsMoe());
    const bool counted = has_fit || (info.canonical && info.op != Op::kSampling);
    // A MoE model whose MLP is moe_mlp runs the dense MLP's ops in its dense layers only;
    // latent attention is the roofline's, whatever the attention fits.
    const bool unused = (IsDenseMlp(info.op) && moe_mlp_fitted_ && d.model.NumDenseLayers() == 0) ||
                        (d.model.IsMla() && (info.op == Op::kAttentionDecode ||
                                             info.op == Op::kAttentionPrefill));
    if (counted) {
      coefficients_[static_cast<size_t>(info.op)] =
          has_fit ? it->second.On(fitted_gpu, shape_) : RooflineFit(info.op).On(d.gpu, shape_);
      if (!unused) (has_fit ? fitted : roofline).emplace_back(info.name);
    }
    if (!counted || info.op == Op::kAttentionDecode || info.op == Op::kAttentionPrefill ||
        info.op == Op::kMoeMlp) {
      continue;
    }
    if (info.op == Op::kAllReduce && d.tensor_parallel == 1) continue;
    if (info.scope == OpScope::kPerLayer) {
      per_layer_rows_.push_back(info.op);
    } else if (info.op == Op::kEmbedding) {
      per_step_rows_.push_back(info.op);
    } else {
      per_step_emit_.push_back(info.op);
    }
  }
  if (model.SplitKvDecode()) split_kv_sms_ = d.gpu.sm_count;
  if (auto it = model.ops.find(Op::kAttentionDecode); it != model.ops.end() && it->second.resident_ctas > 0) {
    paged_grid_sms_ = d.gpu.sm_count;
    paged_grid_resident_ = it->second.resident_ctas;
  }
  if (auto it = model.ops.find(Op::kAttentionPrefill); it != model.ops.end() && it->second.resident_ctas > 0) {
    paged_grid_sms_ = d.gpu.sm_count;
    prefill_grid_resident_ = it->second.resident_ctas;
  }
  overhead_s_ = step_overhead_ms * 1e-3;
  decode_overhead_s_ = model.has_decode_step_overhead ? model.decode_step_overhead_us * 1e-6 : overhead_s_;
  description_ = "calibrated on " + model.device + " (" + path + "); fitted: " +
                 (fitted.empty() ? std::string("none") : Join(fitted, ", ")) +
                 "; roofline: " + (roofline.empty() ? std::string("none") : Join(roofline, ", "));
  if (decode_graphs_) description_ += "; decode steps as CUDA graphs (padded rows, context bucket)";
  if (model.after_prefill) {
    after_prefill_ = *model.after_prefill;
    description_ += "; decode steps after a prefill step: the first slower by " + after_prefill_.Said();
  }
  // The GEMM corrections at this deployment's shapes, on the fitted device (a CPU fit is
  // the CPU's whatever the deployment names), for 16-bit floating-point weights and
  // activations (what the profiles ran; fp8 or int4 GEMMs are other kernels), and for the
  // GEMMs costed at those shapes: not qkv_proj and o_proj under latent attention, not a
  // MoE model's dense MLP when it has no dense layer.
  corrections_.resize(AllOps().size());
  auto half = [](DType t) { return t == DType::kBf16 || t == DType::kFp16; };
  if (gemm_corrections && (model.device == "cpu" || model.device == d.gpu.name) &&
      half(d.weight_dtype) && half(d.activation_dtype)) {
    std::vector<std::string> corrected;
    for (const OpInfo& info : AllOps()) {
      if (!IsGemm(info.op) || model.ops.count(info.op) == 0) continue;
      if (d.model.IsMla() && (info.op == Op::kQkvProj || info.op == Op::kOProj)) continue;
      if (IsDenseMlp(info.op) && d.model.IsMoe() && d.model.NumDenseLayers() == 0) continue;
      const OpWork w = RowsWork(info.op, shape_, 1);
      const GemmCorrection* c =
          FindGemmCorrection(model.gemm_corrections, info.op, w.gemm_k, w.gemm_n);
      if (c == nullptr) continue;
      corrections_[static_cast<size_t>(info.op)] = *c;
      corrected.emplace_back(info.name);
    }
    if (!corrected.empty()) description_ += "; measured GEMM corrections: " + Join(corrected, ", ");
  }
  if (!NeedsRoofline(d)) return;
  RooflineOptions options;
  options.routing = routing;
  roofline_ = std::make_unique<RooflineCostModel>(options, d);
  pipeline_stages_ = d.pipeline_parallel;
  if (d.pipeline_parallel > 1) {
    description_ += "; stage transfers (roofline)";
    // A stage's layers, the first NumDenseLayers() dense.
    int32_t first = 0;
    for (const int32_t n : roofline_->StageLayers()) {
      const int32_t dense = std::clamp(d.model.NumDenseLayers() - first, 0, n);
      stage_dense_layers_.push_back(dense);
      stage_moe_layers_.push_back(n - dense);
      first += n;
    }
  }
  if (d.tensor_parallel > 1 && roofline_->TensorParallelCrossesNodes()) {
    allreduce_on_network_ = true;
    description_ += "; all-reduce over the network between nodes (roofline)";
  }
  if (d.model.IsMla()) SetUpLatentAttention(d);
  if (d.model.IsMoe()) SetUpMixtureOfExperts(d, routing);
}

void CalibratedCostModel::SetUpLatentAttention(const DeploymentSpec& d) {
  mla_ = true;
  latent_gemms_ = MlaAttentionGemms(d.model, d.tensor_parallel);
  description_ += "; latent attention: attention (roofline), its " +
                  std::to_string(latent_gemms_.size() - 1) +
                  " projections from qkv_proj and its output from o_proj";
  SetUpAttentionSide();
}

void CalibratedCostModel::SetUpAttentionSide() {
  // The per-layer ops outside the MLP and its all-reduce (MLA: outside its GEMMs too).
  attention_side_rows_.clear();
  for (const Op op : per_layer_rows_) {
    const bool latent_gemm = mla_ && (op == Op::kQkvProj || op == Op::kOProj);
    if (!IsDenseMlp(op) && op != Op::kAllReduce && !latent_gemm) attention_side_rows_.push_back(op);
  }
}

void CalibratedCostModel::SetUpMixtureOfExperts(const DeploymentSpec& d,
                                                const ExpertRoutingOptions& routing) {
  moe_ = true;
  SetUpAttentionSide();
  const int32_t ep = d.expert_parallel;
  routing_ = ExpertRouting(d.model.num_experts, d.model.num_experts_per_tok, ep, routing);
  expert_shape_ = RoutedExpertShape(shape_, ep);
  shared_expert_ = d.model.shared_expert_intermediate_size > 0;
  shared_shape_ = SharedExpertShape(shape_);
  // One fused kernel each: its weight reads overlap its FLOPs, the weights streaming at
  // the rate the fit's matrix-vector kernel measured when it has one (the header's note).
  auto fused = [this](Op op) {
    OpCoefficients c = Of(op);
    c.additive = false;
    if (c.has_single_row) c.s_per_byte = c.single_row_s_per_byte;
    return c;
  };
  fused_gate_up_ = fused(Op::kGateUpProj);
  fused_down_ = fused(Op::kDownProj);
  std::string moe = "; mixture of experts: ";
  if (moe_mlp_fitted_) {
    moe += "moe_mlp (the whole MLP, fitted)";
  } else {
    moe += "router (roofline), ";
    if (shared_expert_) moe += "shared expert (gate_up_proj, silu_and_mul, down_proj), ";
    moe += "routed experts as grouped gate_up_proj and down_proj GEMMs with silu_and_mul";
  }
  if (ep > 1) moe += ", all-to-all over " + std::to_string(ep) + " GPUs (roofline)";
  if (routing.routing_skew > 0 || routing.routing_locality > 0) {
    moe += ", routing skew " + FormatDouble(routing.routing_skew) + " and locality " +
           FormatDouble(routing.routing_locality) + " over " +
           FormatDouble(routing.routing_favourites) + " favourites";
  }
  description_ += moe;
}

double CalibratedCostModel::MoeMlpSeconds(const RoutedTokens& step) const {
  if (moe_mlp_fitted_) return OpSeconds(Of(Op::kMoeMlp), MoeMlpWork(shape_, step, routing_));
  const double tokens = step.tokens;
  double s = roofline_->RouterSeconds(tokens);
  if (shared_expert_) {
    for (const Op op : kDenseMlpOps) {
      s += OpSeconds(Of(op), RowsWork(op, shared_shape_, tokens));
    }
  }
  const double rows = routing_.BusiestGpuRows(step);
  const double touched = routing_.Touched(step) / routing_.expert_parallel();
  const double padded =
      routing_.BusiestGpuPaddedRows(step, FusedMoeBlockRows(tokens, routing_.experts()));
  s += OpSeconds(fused_gate_up_,
                 GroupedExpertWork(Op::kGateUpProj, expert_shape_, rows, touched, padded));
  s += OpSeconds(fused_down_, GroupedExpertWork(Op::kDownProj, expert_shape_, rows, touched, padded));
  return s + OpSeconds(Of(Op::kSiluAndMul), RowsWork(Op::kSiluAndMul, expert_shape_, rows));
}

std::optional<DecodeGraphRun> CalibratedCostModel::GraphOf(const StepPlan& plan) const {
  if (!decode_graphs_ || plan.seqs.empty()) return std::nullopt;
  int64_t longest = 1;
  for (const ScheduledRequest& seq : plan.seqs) {
    if (CostedNewTokens(seq) != 1 || !(seq.emits_token || seq.is_padding)) return std::nullopt;
    longest = std::max<int64_t>(longest, CostedContextLen(seq));
  }
  constexpr int64_t kMax = INT32_MAX;
  const auto seqs = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(plan.seqs.size()), kMax));
  return DecodeGraphRun{kernels::DecodeGraphBatch(seqs, graph_max_seqs_),
                        kernels::DecodeGraphContextBucket(static_cast<int32_t>(std::min(longest, kMax)),
                                                          graph_max_model_len_)};
}

CalibratedCostModel::StepParts CalibratedCostModel::PartsOf(const StepPlan& plan) const {
  StepParts p;
  double emitting = 0;
  bool all_single = true;
  RoutedTokens routed;
  for (const ScheduledRequest& seq : plan.seqs) {
    const int32_t n = CostedNewTokens(seq);
    p.tokens += n;
    if (moe_) routing_.Add(routed, n);
    const bool emits = seq.emits_token || seq.is_padding;
    if (emits) emitting += 1;
    all_single = all_single && n == 1;
  }
  p.decode_only = all_single && !plan.seqs.empty();
  // The CUDA runner's graph for the step: every op over its padded rows, one token each.
  const std::optional<DecodeGraphRun> graph = GraphOf(plan);
  p.graph = graph.has_value();
  if (p.graph) {
    const auto seqs = static_cast<int64_t>(plan.seqs.size());
    p.graph_padding = std::max<int64_t>(0, graph->rows - seqs);
    p.graph_bucket = graph->context_bucket;
    // The padding rows are one token (id 0 at position 0) each, so they go to the same
    // experts: routed as one token.
    if (moe_ && p.graph_padding > 0) routing_.Add(routed, 1);
    p.tokens += static_cast<double>(p.graph_padding);
    emitting += static_cast<double>(p.graph_padding);
  }
  const double tokens = p.tokens;
  if (tokens <= 0) return p;  // swaps only: the backend times the copies
  double layer = mla_ ? roofline_->AttentionLayerSeconds(plan)
                      : FittedAttentionSeconds(plan, all_single, p);
  const double allreduce = AllReduceSeconds(tokens);
  if (!moe_ && !mla_) {
    for (const Op op : per_layer_rows_) {
      layer += op == Op::kAllReduce ? 2.0 * allreduce : Seconds(op, RowsWork(op, shape_, tokens));
    }
    p.layer_s = layer;
  } else {
    // Every layer: attention and one all-reduce; a dense layer's MLP and its all-reduce; a
    // MoE layer's MLP and its all-reduce, or under expert parallelism its all-to-all.
    for (const Op op : attention_side_rows_) layer += Seconds(op, RowsWork(op, shape_, tokens));
    for (size_t i = 0; i < latent_gemms_.size(); ++i) {  // MLA: the output projection last
      const auto& [k, n] = latent_gemms_[i];
      const Op op = i + 1 == latent_gemms_.size() ? Op::kOProj : Op::kQkvProj;
      layer += OpSeconds(Of(op), GemmWork(shape_, tokens, k, n));
    }
    double dense_mlp = 0;
    for (const Op op : kDenseMlpOps) {
      dense_mlp += dense_layers_ > 0 ? Seconds(op, RowsWork(op, shape_, tokens)) : 0.0;
    }
    const double moe_collective =
        routing_.expert_parallel() > 1 ? roofline_->AllToAllSeconds(tokens) : allreduce;
    p.layer_s = layer + allreduce;
    p.dense_mlp_s = dense_mlp + allreduce;
    p.moe_mlp_s = moe_ ? MoeMlpSeconds(routed) + moe_collective : 0.0;
  }
  for (const Op op : per_step_rows_) p.first_s += Seconds(op, RowsWork(op, shape_, tokens));
  if (emitting > 0) {
    for (const Op op : per_step_emit_) p.last_s += Seconds(op, RowsWork(op, shape_, emitting));
  }
  return p;
}

double CalibratedCostModel::Seconds(Op op, const OpWork& work) const {
  const double s = OpSeconds(Of(op), work);
  const GemmCorrection& c = corrections_[static_cast<size_t>(op)];
  // A one-row product with a matrix-vector fit of its own is that kernel's, uncorrected.
  if (c.rows.empty() || (work.single_row && Of(op).has_single_row)) return s;
  return s * c.At(work.gemm_rows);
}

double CalibratedCostModel::LayersSeconds(const StepParts& p, double dense, double moe) {
  // A dense model's parts beyond layer_s are 0: its layers' time is layer_s each.
  return (dense + moe) * p.layer_s + dense * p.dense_mlp_s + moe * p.moe_mlp_s;
}

double CalibratedCostModel::AllReduceSeconds(double tokens) const {
  if (shape_.tensor_parallel <= 1) return 0;
  if (allreduce_on_network_) return roofline_->AllReduceSeconds(tokens);
  return OpSeconds(Of(Op::kAllReduce), RowsWork(Op::kAllReduce, shape_, tokens));
}

double CalibratedCostModel::OpsSeconds(const StepPlan& plan) const { return OpsSeconds(PartsOf(plan)); }

double CalibratedCostModel::OpsSeconds(const StepParts& p) const {
  if (p.tokens <= 0) return 0;
  double step = LayersSeconds(p, dense_layers_, moe_layers_);
  step += p.first_s + p.last_s;
  for (size_t b = 0; b + 1 < pipeline_stages_; ++b) step += roofline_->StageTransferSeconds(b, p.tokens);
  return step;
}

void CalibratedCostModel::StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const {
  if (stages.size() != pipeline_stages_ || pipeline_stages_ <= 1) {
    CostModel::StageTimes(plan, stages);
    return;
  }
  const StepParts p = PartsOf(plan);
  const TimeNs total = StepTime(plan);
  const double factor = AfterPrefillFactor(plan, p);
  // Stage ends as the running sum of stage times, rounded once each, the last the step's
  // time: the stage times sum to StepTime exactly. The embedding runs on the first stage,
  // the final norm, LM head and sampling on the last.
  double elapsed = p.first_s;
  TimeNs previous = 0;
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    elapsed += LayersSeconds(p, stage_dense_layers_[stage], stage_moe_layers_[stage]);
    elapsed += overhead_s_ / static_cast<double>(stages.size());
    if (p.tokens > 0 && stage + 1 < stages.size()) {
      elapsed += roofline_->StageTransferSeconds(stage, p.tokens);
    }
    const TimeNs end =
        stage + 1 < stages.size() ? std::clamp(FromSeconds(elapsed * factor), previous, total) : total;
    stages[stage] = end - previous;
    previous = end;
  }
}

namespace {

// A sequence's chunk as the prefill kernel takes it (padding: one token, as everywhere).
PrefillChunk ChunkOf(const ScheduledRequest& seq) {
  return PrefillChunk{CostedNewTokens(seq), seq.num_computed_tokens};
}

}  // namespace

void CalibratedCostModel::AddPrefillGridWork(OpWork& work, const StepPlan& plan, size_t first) const {
  if (!(Of(Op::kAttentionPrefill).s_per_cta_token > 0) || first >= plan.seqs.size()) return;
  AddPagedPrefillGridWork(work, shape_, paged_grid_sms_, prefill_grid_resident_,
                          static_cast<int64_t>(plan.seqs.size() - first),
                          [&](int64_t i) { return ChunkOf(plan.seqs[first + static_cast<size_t>(i)]); });
}

double CalibratedCostModel::FittedAttentionSeconds(const StepPlan& plan, bool all_single, const StepParts& p) const {
  const bool graph = p.graph;
  const int64_t graph_padding = p.graph_padding;
  const auto seqs = static_cast<int64_t>(plan.seqs.size());
  const auto attended = [&](int64_t i) { return CostedContextLen(plan.seqs[static_cast<size_t>(i)]); };
  // servelab's CUDA engine (a decode fit on its own kernel's grid) attends a mixed step's
  // leading one-token seqs with the decode kernel and the rest with the prefill kernel
  // (engine/cuda/device_step.h): two launches, each its own op's time.
  if (!all_single && paged_grid_resident_ > 0) {
    // The decode prefix: seqs [0, end) of one new token each (padding costs one, as
    // everywhere in this model).
    size_t end = 0;
    OpWork decode;
    for (; end < plan.seqs.size() && CostedNewTokens(plan.seqs[end]) == 1; ++end) {
      decode += DecodeWork(shape_, plan.seqs[end].num_computed_tokens);
    }
    if (end > 0) {
      AddPagedDecodeGridWork(decode, shape_, paged_grid_sms_, paged_grid_resident_,
                             static_cast<int64_t>(end), attended);
      OpWork prefill;
      for (size_t j = end; j < plan.seqs.size(); ++j) {
        const ScheduledRequest& seq = plan.seqs[j];
        prefill += PrefillWork(shape_, CostedNewTokens(seq), seq.num_computed_tokens);
      }
      AddPrefillGridWork(prefill, plan, end);
      return OpSeconds(Of(Op::kAttentionDecode), decode) + OpSeconds(Of(Op::kAttentionPrefill), prefill);
    }
  }
  // servelab's own prefill kernel (a fit with per_cta_token_us) is bound by its grid's
  // walks, the blocks as the SMs take them (or its longest walk: paged_prefill_grid.h);
  // the rows' bytes and FLOPs are the other terms. Priced at 0 by other fits.
  OpWork attention;
  for (const ScheduledRequest& seq : plan.seqs) {
    const double n = CostedNewTokens(seq);
    const double cached = seq.num_computed_tokens;
    attention += all_single ? DecodeWork(shape_, cached) : PrefillWork(shape_, n, cached);
  }
  for (int64_t i = 0; i < graph_padding; ++i) attention += DecodeWork(shape_, 0);  // one position
  if (!all_single) AddPrefillGridWork(attention, plan, 0);
  if (all_single && split_kv_sms_ > 0) {
    AddSplitKvWork(attention, shape_, split_kv_sms_, split_kv_length_, seqs, attended);
  }
  // servelab's own decode kernel: its launch's grid (nothing without a fit on it).
  // A graph's launch: its padding rows too, its partitions for the context bucket.
  if (all_single && graph) {
    AddDecodeGraphLaunchWork(attention, shape_, paged_grid_sms_, paged_grid_resident_, seqs, seqs + graph_padding,
                             attended, p.graph_bucket);
  } else if (all_single) {
    AddPagedDecodeGridWork(attention, shape_, paged_grid_sms_, paged_grid_resident_, seqs, attended);
  }
  return OpSeconds(Of(all_single ? Op::kAttentionDecode : Op::kAttentionPrefill), attention);
}

double CalibratedCostModel::AfterPrefillFactor(const StepPlan& plan, const StepParts& p) const {
  if (!p.decode_only) return 1.0;
  return after_prefill_.Factor(plan.steps_since_prefill, static_cast<int64_t>(plan.seqs.size()));
}

TimeNs CalibratedCostModel::StepTime(const StepPlan& plan) const {
  const StepParts p = PartsOf(plan);
  const double ops = OpsSeconds(p);
  const double factor = AfterPrefillFactor(plan, p);
  if (ops <= 0) return FromSeconds(overhead_s_ * factor);
  // A decode step's own overhead (negative where graphs save launches): never below 0.
  // With the model's graphs, a decode step the runner runs eagerly takes the others'.
  const bool own = p.decode_only && (!decode_graphs_ || p.graph);
  const double seconds = std::max(0.0, ops + (own ? decode_overhead_s_ : overhead_s_));
  return FromSeconds(seconds * factor);
}

StatusOr<std::unique_ptr<CostModel>> MakeCalibratedCostModel(ParamReader& params,
                                                             const DeploymentSpec& deployment) {
  const std::string path = params.GetPath("path");
  SERVELAB_RETURN_IF_ERROR(params.Error());
  // Latent attention, a MoE router and its all-to-all, stage transfers and collectives
  // between nodes come from the roofline, which checks its deployment.
  if (CalibratedCostModel::NeedsRoofline(deployment)) {
    SERVELAB_RETURN_IF_ERROR(RooflineCostModel::Validate(deployment));
  }
  auto model = ReadCalibratedModel(path);
  if (!model.ok()) {
    // The experiment's place first (which file named the model, where), then the model's.
    return Status(model.status().code(), params.Where("path") + ": " + model.status().message());
  }
  const bool split_kv = model->SplitKvDecode();
  if (split_kv && deployment.gpu.sm_count <= 0) {
    return InvalidArgument("cost_model: " + path + " fits attention_decode in the split_kv form, "
                           "which needs the GPU's SMs: hardware.gpu.sm_count (" +
                           deployment.gpu.name + " has none)");
  }
  for (const Op op : {Op::kAttentionDecode, Op::kAttentionPrefill}) {
    if (model->ops.count(op) > 0 && model->ops.at(op).resident_ctas > 0 && deployment.gpu.sm_count <= 0) {
      return InvalidArgument("cost_model: " + path + " fits " + std::string(InfoOf(op).name) +
                             " on servelab's kernel's grid, which needs the GPU's SMs: "
                             "hardware.gpu.sm_count (" + deployment.gpu.name + " has none)");
    }
  }
  // The defaults depend on the model file, so the resolved config records the values used.
  const double step_overhead_ms = params.GetDouble(
      "step_overhead_ms",
      model->has_step_overhead ? model->step_overhead_us * 1e-3 : RooflineOptions{}.step_overhead_ms,
      Bounds{0, 1e6});  // the roofline's bounds: up to 1,000 s a step
  // Decode-only steps: the model's own decode overhead (signed: graphs save launches), else
  // the step overhead. Read (so known and recorded) when the model has one or it was given.
  if (model->has_decode_step_overhead || params.Has("decode_step_overhead_ms")) {
    model->decode_step_overhead_us =
        1e3 * params.GetDouble("decode_step_overhead_ms",
                               model->has_decode_step_overhead ? model->decode_step_overhead_us * 1e-3
                                                               : step_overhead_ms,
                               Bounds{-1e6, 1e6});
    model->has_decode_step_overhead = true;
  }
  // Read (so known) when it applies or was given; recorded in the resolved config only then.
  const int64_t split_kv_length = split_kv || params.Has("split_kv_length")
                                      ? params.GetInt("split_kv_length", 0, Bounds{0, 1 << 30})
                                      : 0;
  if (!split_kv && params.Has("split_kv_length")) {
    return InvalidArgument(params.Where("split_kv_length") + ": " + path +
                           " has no split_kv decode fit for it to apply to");
  }
  // Read (so known and recorded) for MoE models, or when given.
  ExpertRoutingOptions routing;
  if (deployment.model.IsMoe() || params.Has("expert_imbalance") || params.Has("routing_skew") ||
      params.Has("routing_locality") || params.Has("routing_favourites")) {
    ExpertRoutingOptions counted;
    for (const CountedRouting& r : model->routing) {
      if (r.Matches(deployment.model)) counted = r.Options();
    }
    auto read = ReadExpertRoutingOptions(params, counted);
    if (!read.ok()) return read.status();
    routing = *read;
  }
  // Read (so known and recorded) when the model has corrections, or when given.
  const bool gemm_corrections = !model->gemm_corrections.empty() || params.Has("gemm_corrections")
                                    ? params.GetBool("gemm_corrections", true)
                                    : false;
  // Read (so known and recorded) when the model ran its decode steps as graphs, or when given.
  const bool decode_graphs = model->decode_graphs || params.Has("decode_graphs")
                                 ? params.GetBool("decode_graphs", model->decode_graphs)
                                 : false;
  if (decode_graphs && !model->decode_graphs) {
    return InvalidArgument(params.Where("decode_graphs") + ": " + path +
                           " was not fitted on decode steps run as CUDA graphs (no decode_graphs: true)");
  }
  // Read (so known and recorded) when the model has the first decodes' slowdown after a
  // prefill step, or when given.
  const bool after_prefill = model->after_prefill.has_value() || params.Has("after_prefill")
                                 ? params.GetBool("after_prefill", model->after_prefill.has_value())
                                 : false;
  if (after_prefill && !model->after_prefill) {
    return InvalidArgument(params.Where("after_prefill") + ": " + path + " has no after_prefill fit (its "
                           "profiles had no " + kStepAfterPrefill + " rows)");
  }
  if (!after_prefill) model->after_prefill.reset();
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  return std::unique_ptr<CostModel>(std::make_unique<CalibratedCostModel>(
      *model, path, deployment, step_overhead_ms, split_kv_length, routing, gemm_corrections,
      decode_graphs));
}

}  // namespace servelab
