#include "sim/roofline_cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/memory.h"
#include "sim/op_model.h"

namespace servelab {
namespace {

constexpr double kFp32LogitBytes = 4.0;

Status Invalid(const std::string& what) {
  return InvalidArgument("roofline cost model: " + what);
}

}  // namespace

int32_t StageBoundariesCrossingNodes(int32_t tp, int32_t pp, int32_t gpus_per_node) {
  int32_t crossing = 0;
  for (int64_t s = 0; s + 1 < pp; ++s) {
    const int64_t last = (s + 1) * tp - 1, next = (s + 1) * tp;  // GPUs either side
    crossing += last / gpus_per_node != next / gpus_per_node ? 1 : 0;
  }
  return crossing;
}

bool TensorGroupsCrossNodes(int32_t tp, int32_t pp, int32_t gpus_per_node) {
  for (int64_t s = 0; s < pp; ++s) {
    if (s * tp / gpus_per_node != ((s + 1) * tp - 1) / gpus_per_node) return true;
  }
  return false;
}

double TensorPeakTflops(const GpuSpec& gpu, DType dtype) {
  switch (dtype) {
    case DType::kFp8:
      return gpu.fp8_tflops > 0 ? gpu.fp8_tflops : gpu.bf16_tflops;
    case DType::kFp32:
      return gpu.fp32_tflops > 0 ? gpu.fp32_tflops : gpu.bf16_tflops;
    case DType::kFp16:
    case DType::kBf16:
    case DType::kInt8:
    case DType::kInt4:
      break;
  }
  return gpu.bf16_tflops;
}

Status RooflineCostModel::Validate(const DeploymentSpec& d) {
  const ModelSpec& m = d.model;
  if (m.hidden_size < 1 || m.num_hidden_layers < 1 || m.num_attention_heads < 1 ||
      m.num_key_value_heads < 1 || m.intermediate_size < 1 || m.vocab_size < 1 ||
      m.HeadDim() < 1) {
    return Invalid("model '" + m.name + "' has a non-positive shape");
  }
  if (d.gpu.mem_bandwidth_gbps <= 0 || d.gpu.bf16_tflops <= 0) {
    return Invalid("GPU '" + d.gpu.name + "' needs mem_bandwidth_gbps > 0 and bf16_tflops > 0");
  }
  if (d.tensor_parallel < 1 || d.pipeline_parallel < 1) {
    return Invalid("tensor_parallel and pipeline_parallel must be >= 1");
  }
  if (m.num_attention_heads % d.tensor_parallel != 0) {
    return Invalid("tensor_parallel " + std::to_string(d.tensor_parallel) +
                   " does not divide num_attention_heads " +
                   std::to_string(m.num_attention_heads));
  }
  if (d.pipeline_parallel > m.num_hidden_layers) {
    return Invalid("pipeline_parallel " + std::to_string(d.pipeline_parallel) +
                   " exceeds num_hidden_layers " + std::to_string(m.num_hidden_layers));
  }
  if (!(d.network_gbps > 0) || !(d.network_latency_us >= 0) || d.gpus_per_node < 1) {
    return Invalid("the network needs network_gbps > 0, network_latency_us >= 0 and "
                   "gpus_per_node >= 1");
  }
  if ((d.tensor_parallel > 1 || d.pipeline_parallel > 1) && d.gpu.interconnect_gbps <= 0) {
    return Invalid("GPU '" + d.gpu.name +
                   "' has interconnect_gbps 0 but the deployment spans several GPUs");
  }
  return Status::Ok();
}

RooflineCostModel::RooflineCostModel(const RooflineOptions& config,
                                     const DeploymentSpec& d) {
  SERVELAB_CHECK_MSG(Validate(d).ok(), Validate(d).message());
  const ModelSpec& m = d.model;
  const double tp = d.tensor_parallel;
  const double pp = d.pipeline_parallel;
  const double w = DTypeBytes(d.weight_dtype);
  const double a = DTypeBytes(d.activation_dtype);
  const double kvb = DTypeBytes(d.kv_dtype);
  const double h = m.hidden_size;
  const double q = static_cast<double>(m.QDim()) / tp;        // per GPU
  // K and V widths per GPU; MLA: the cached latent and RoPE key, all of it on every GPU.
  const double kv = m.IsMla() ? static_cast<double>(m.KvLatentDim())
                              : static_cast<double>(KvHeadsPerGpu(m, d.tensor_parallel)) * m.HeadDim();
  const double inter = m.intermediate_size / tp;               // per GPU
  const double vocab = m.vocab_size / tp;                      // per GPU
  num_layers_ = m.num_hidden_layers;

  // Seconds per FLOP and per byte at the configured efficiencies.
  const double gemm_s_per_flop =
      1.0 / (TensorPeakTflops(d.gpu, d.weight_dtype) * 1e12 * config.gemm_efficiency);
  const double attention_s_per_flop =
      1.0 / (TensorPeakTflops(d.gpu, d.activation_dtype) * 1e12 * config.attention_efficiency);
  const double s_per_byte = 1.0 / (d.gpu.mem_bandwidth_gbps * 1e9 * config.memory_efficiency);

  // A [T,k] x [k,n] GEMM: 2kn FLOPs and (k+n) activations per token, kn weights.
  auto gemm = [&](double k, double n) {
    return Gemm{2.0 * k * n * gemm_s_per_flop, k * n * w * s_per_byte,
                (k + n) * a * s_per_byte};
  };
  if (!m.IsMla()) {
    attention_gemms_ = {gemm(h, q + 2.0 * kv), gemm(q, h)};
  } else {
    // Down-projections are replicated over the TP group (as vLLM's ReplicatedLinear),
    // up-projections and the output split by heads. The latent's up-projections to each
    // head's key and value are absorbed into the query and the output (one GEMM's worth
    // per new token).
    mla_ = true;
    attention_gemms_.clear();
    for (const auto& [k, n] : MlaAttentionGemms(m, tp)) attention_gemms_.push_back(gemm(k, n));
  }
  dense_mlp_gemms_ = {gemm(h, 2.0 * inter), gemm(inter, h)};
  num_dense_layers_ = m.NumDenseLayers();
  num_moe_layers_ = m.NumMoeLayers();
  // MoE: every expert's width splits over the TP group, as vLLM's fused MoE does, or,
  // with expert parallelism, each GPU holds num_experts / ep whole experts; the router is
  // replicated and a shared expert splits over the TP group either way.
  expert_parallel_ = d.expert_parallel;
  if (m.IsMoe()) {
    routing_ = ExpertRouting(m.num_experts, m.num_experts_per_tok, d.expert_parallel,
                             config.routing);
  }
  const double expert = d.expert_parallel > 1 ? m.ExpertWidth() : m.ExpertWidth() / tp;
  const double shared = m.shared_expert_intermediate_size / tp;
  if (m.IsMoe()) {
    moe_dense_gemms_ = {gemm(h, m.num_experts), gemm(h, 2.0 * shared), gemm(shared, h)};
    const Gemm up = gemm(h, 2.0 * expert), down = gemm(expert, h);
    expert_compute_s_per_row_ = up.compute_s_per_token + down.compute_s_per_token;
    expert_act_s_per_row_ = up.act_s_per_token + down.act_s_per_token;
    expert_weight_s_ = up.weight_s + down.weight_s;
  }

  // Attention, one layer: QK^T and PV are 2 FLOPs per (query head, dim, causal pair) each.
  attention_s_per_pair_ = 4.0 * (m.num_attention_heads / tp) * m.HeadDim() * attention_s_per_flop;
  kv_read_s_per_token_ = 2.0 * kv * kvb * s_per_byte;
  qo_s_per_new_token_ = 2.0 * q * a * s_per_byte;
  if (m.IsMla()) {
    // Decode attends in the latent space, every head over the one cached latent (keys:
    // latent + RoPE key; values: the latent). A prefill chunk attends with full keys and
    // values instead (as FlashMLA's prefill and vLLM do), up-projecting the cached
    // latent of every context token it attends to.
    const double heads = m.num_attention_heads / tp;
    const double lora = m.kv_lora_rank, v = m.v_head_dim, nope = m.qk_nope_head_dim;
    attention_s_per_pair_ = 2.0 * heads * (kv + lora) * attention_s_per_flop;
    kv_read_s_per_token_ = kv * kvb * s_per_byte;
    qo_s_per_new_token_ = heads * (kv + lora) * a * s_per_byte;
    prefill_s_per_pair_ = 2.0 * heads * (m.HeadDim() + v) * attention_s_per_flop;
    prefill_s_per_cached_token_ = 2.0 * lora * heads * (nope + v) * gemm_s_per_flop;
    prefill_qo_s_per_new_token_ = heads * (m.HeadDim() + v) * a * s_per_byte;
  }

  // Elementwise bytes per token, one layer: 2 fused residual-add + RMSNorms (read x and
  // the residual, write both: 4h each), RoPE on q and k (read + write), SiLU*mul (read
  // 2I, write I; in a MoE layer the shared expert's here, the routed experts' per GPU
  // row below), KV write (read K and V activations, write them to the cache).
  const double mlp_width =  // per layer, the mean over dense and MoE layers
      m.IsMoe() ? (num_dense_layers_ * inter + num_moe_layers_ * shared) / num_layers_ : inter;
  // (MLA: kv is the latent, written once, not K and V.)
  const double kv_writes = m.IsMla() ? 0.5 : 1.0;
  const double layer_bytes = 2.0 * (4.0 * h) * a + 2.0 * (q + kv) * a + 3.0 * mlp_width * a +
                             2.0 * kv_writes * kv * (a + kvb);
  // Once per step: embedding gather (read a weight row, write it) and the final norm.
  const double step_bytes = h * (w + a) + 2.0 * h * a;
  elementwise_s_per_token_ = (num_layers_ * layer_bytes + step_bytes) * s_per_byte;
  // A routed expert's SiLU*mul, per token x expert row a GPU computes: every row at 1/tp
  // of the width, or (EP) the busiest GPU's rows at the whole width.
  expert_silu_s_per_row_ = 3.0 * expert * a * s_per_byte;

  // LM head: per emitting row, [1,h] x [h,V/tp] with fp32 logits out.
  lm_head_ = Gemm{2.0 * h * vocab * gemm_s_per_flop, h * vocab * w * s_per_byte,
                  (h * a + vocab * kFp32LogitBytes) * s_per_byte};

  const double nvlink_s_per_byte =
      d.gpu.interconnect_gbps > 0
          ? 1.0 / (d.gpu.interconnect_gbps * 1e9 * config.interconnect_efficiency)
          : 0.0;
  const double network_s_per_byte = 1.0 / (d.network_gbps * 1e9 * config.interconnect_efficiency);
  const double network_latency_s = d.network_latency_us * 1e-6;
  const double latency_s = config.allreduce_latency_us * 1e-6;
  // A TP (= EP) group on more than one node runs its collectives over the network: a
  // ring's time is its slowest hop's.
  tp_crosses_nodes_ =
      TensorGroupsCrossNodes(d.tensor_parallel, d.pipeline_parallel, d.gpus_per_node);
  const double link_s_per_byte = tp_crosses_nodes_ ? network_s_per_byte : nvlink_s_per_byte;
  const double collective_latency_s = latency_s + (tp_crosses_nodes_ ? network_latency_s : 0.0);
  if (expert_parallel_ > 1) {
    // All-to-all around each MoE layer: every GPU sends its 1/ep of the rows, (ep-1)/ep
    // of them to other GPUs, a hidden vector each, and gets the results back.
    const double ep = expert_parallel_;
    all_to_all_s_per_row_ = 2.0 * (ep - 1.0) / (ep * ep) * h * a * link_s_per_byte;
    all_to_all_latency_s_ = 2.0 * collective_latency_s;
  }
  if (d.tensor_parallel > 1) {
    // One after attention in every layer and one after each TP-split MLP (the MoE
    // layers' combine replaces theirs under expert parallelism).
    const double allreduces =
        expert_parallel_ > 1 ? num_layers_ + num_dense_layers_ : 2.0 * num_layers_;
    allreduce_call_s_per_token_ = 2.0 * (tp - 1.0) / tp * h * a * link_s_per_byte;
    collective_latency_s_ = collective_latency_s;
    allreduce_s_per_token_ = allreduces * allreduce_call_s_per_token_;
    allreduce_latency_s_ = allreduces * collective_latency_s;
  }
  if (d.pipeline_parallel > 1) {
    // Stage s holds the replica's GPUs [s tp, (s + 1) tp): the boundary after it crosses
    // nodes when those GPUs and the next stage's are on different nodes.
    stage_boundaries_crossing_nodes_ = StageBoundariesCrossingNodes(
        d.tensor_parallel, d.pipeline_parallel, d.gpus_per_node);
    const double crossing = stage_boundaries_crossing_nodes_;
    if (crossing == 0) {
      transfer_s_per_token_ = (pp - 1.0) * h * a * nvlink_s_per_byte;
      transfer_latency_s_ = (pp - 1.0) * latency_s;
    } else {
      transfer_s_per_token_ =
          ((pp - 1.0 - crossing) * nvlink_s_per_byte + crossing * network_s_per_byte) * h * a;
      transfer_latency_s_ = (pp - 1.0) * latency_s + crossing * network_latency_s;
    }
  }
  // Stages and their boundaries, for StageTimes.
  const int32_t per_stage = (m.num_hidden_layers + d.pipeline_parallel - 1) / d.pipeline_parallel;
  for (int32_t stage = 0, left = m.num_hidden_layers; stage < d.pipeline_parallel; ++stage) {
    stage_layers_.push_back(std::min(per_stage, left));
    left -= stage_layers_.back();
  }
  for (int32_t stage = 0; stage + 1 < d.pipeline_parallel; ++stage) {
    const int64_t last_gpu = int64_t{stage + 1} * d.tensor_parallel - 1;
    const bool crosses = last_gpu / d.gpus_per_node != (last_gpu + 1) / d.gpus_per_node;
    boundary_s_per_token_.push_back(h * a * (crosses ? network_s_per_byte : nvlink_s_per_byte));
    boundary_latency_s_.push_back(latency_s + (crosses ? network_latency_s : 0.0));
  }
  overhead_s_ = config.step_overhead_ms * 1e-3;
}

void RooflineCostModel::StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const {
  if (stages.size() != stage_layers_.size()) {
    CostModel::StageTimes(plan, stages);
    return;
  }
  const RooflineBreakdown b = Breakdown(plan);
  const TimeNs total = FromSeconds(b.total_s());
  double tokens = 0;
  for (const ScheduledRequest& seq : plan.seqs) tokens += CostedNewTokens(seq);
  const double transfers = tokens * transfer_s_per_token_ + transfer_latency_s_;
  const double layer_work = b.gemm_s + b.attention_s + b.elementwise_s + (b.communication_s - transfers);
  // Stage ends as the running sum of stage times, rounded once each, the last the step's
  // time: the stage times sum to StepTime exactly.
  double elapsed = 0;
  TimeNs previous = 0;
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    elapsed += layer_work * stage_layers_[stage] / num_layers_ + b.overhead_s / static_cast<double>(stages.size());
    if (stage + 1 < stages.size()) {
      elapsed += tokens * boundary_s_per_token_[stage] + boundary_latency_s_[stage];
    } else {
      elapsed += b.lm_head_s;
    }
    const TimeNs end = stage + 1 < stages.size() ? std::clamp(FromSeconds(elapsed), previous, total) : total;
    stages[stage] = end - previous;
    previous = end;
  }
}

RooflineCostModel::Batch RooflineCostModel::BatchOf(const StepPlan& plan) const {
  Batch batch;
  for (const ScheduledRequest& seq : plan.seqs) {
    const int32_t n = CostedNewTokens(seq);
    const int64_t context = CostedContextLen(seq);
    batch.tokens += n;
    if (num_moe_layers_ > 0) routing_.Add(batch.routed, n);
    if (seq.emits_token || seq.is_padding) batch.emitting += 1;
    const double pairs = static_cast<double>(n) * seq.num_computed_tokens + n * (n + 1.0) / 2.0;
    if (mla_ && !seq.IsDecode()) {  // a prefill chunk at full width (see the constructor)
      const double compute_s = pairs * prefill_s_per_pair_ +
                               seq.num_computed_tokens * prefill_s_per_cached_token_;
      const double memory_s = static_cast<double>(context) * kv_read_s_per_token_ +
                              n * prefill_qo_s_per_new_token_;
      batch.prefill_s += std::max(compute_s, memory_s);
      continue;
    }
    const double compute_s = pairs * attention_s_per_pair_;
    const double memory_s = static_cast<double>(context) * kv_read_s_per_token_ + n * qo_s_per_new_token_;
    if (compute_s > memory_s) {
      batch.compute_pairs += pairs;
    } else {
      batch.memory_context += context;
      batch.memory_new += n;
    }
  }
  return batch;
}

RooflineBreakdown RooflineCostModel::Breakdown(const StepPlan& plan) const {
  return BreakdownOf(BatchOf(plan));
}

bool RooflineCostModel::TimesDecodeBatches() const {
  // A decode (n = 1, context c + 1) costs max((c + 1) a, (c + 1) kv + qo) with a the
  // compute time per pair, kv the read time per token: memory-bound for every c when
  // a <= kv (rounding is monotone, qo >= 0), so its batch is (seqs, Σ contexts) alone.
  return attention_s_per_pair_ <= kv_read_s_per_token_ && qo_s_per_new_token_ >= 0;
}

TimeNs RooflineCostModel::DecodeStepTime(int64_t seqs, int64_t context_tokens) const {
  Batch batch;
  batch.tokens = static_cast<double>(seqs);
  batch.emitting = static_cast<double>(seqs);
  batch.memory_context = context_tokens;
  batch.memory_new = seqs;
  batch.routed = RoutedTokens::Independent(batch.tokens);
  return FromSeconds(BreakdownOf(batch).total_s());
}

double RooflineCostModel::AttentionLayerSeconds(const Batch& batch) const {
  // Each seq at its own bound: a long decode stays memory-bound beside a compute-bound
  // prefill, which a batch mean would blend away.
  double attention_layer_s = batch.compute_pairs * attention_s_per_pair_ +
                             static_cast<double>(batch.memory_context) * kv_read_s_per_token_ +
                             static_cast<double>(batch.memory_new) * qo_s_per_new_token_;
  if (mla_) attention_layer_s += batch.prefill_s;
  return attention_layer_s;
}

double RooflineCostModel::AttentionLayerSeconds(const StepPlan& plan) const {
  return AttentionLayerSeconds(BatchOf(plan));
}

RooflineBreakdown RooflineCostModel::BreakdownOf(const Batch& batch) const {
  RooflineBreakdown b;
  b.overhead_s = overhead_s_;
  const double tokens = batch.tokens;
  const double emitting = batch.emitting;
  const double attention_layer_s = AttentionLayerSeconds(batch);
  if (tokens <= 0) return b;  // swaps only: the backend's copies are not modelled here

  auto time = [tokens](const Gemm& g) { return GemmSeconds(g, tokens); };
  // MoE: the busiest GPU's token x expert rows (all of them without EP), for the experts'
  // GEMMs and their SiLU x mul.
  const double gpu_rows = num_moe_layers_ > 0 ? routing_.BusiestGpuRows(batch.routed) : 0.0;
  double layer_s = 0;  // (summed in this order so that dense models keep their bits)
  for (const Gemm& g : attention_gemms_) layer_s += time(g);
  if (num_moe_layers_ == 0) {
    layer_s += time(dense_mlp_gemms_[0]);
    layer_s += time(dense_mlp_gemms_[1]);
    b.gemm_s = num_layers_ * layer_s;
  } else {
    b.gemm_s = num_layers_ * layer_s +
               num_dense_layers_ * (time(dense_mlp_gemms_[0]) + time(dense_mlp_gemms_[1]));
    // Per GPU: all rows at 1/tp of every expert, or (EP) the busiest GPU's rows and its
    // share of the experts touched.
    const double touched = routing_.Touched(batch.routed) / expert_parallel_;
    const double experts_s =
        std::max(gpu_rows * expert_compute_s_per_row_,
                 touched * expert_weight_s_ + gpu_rows * expert_act_s_per_row_);
    double moe_s = experts_s;
    for (const Gemm& g : moe_dense_gemms_) moe_s += g.weight_s > 0 ? time(g) : 0;
    b.gemm_s += num_moe_layers_ * moe_s;
  }
  b.attention_s = num_layers_ * attention_layer_s;
  b.elementwise_s = tokens * elementwise_s_per_token_;
  b.elementwise_s += num_moe_layers_ * gpu_rows * expert_silu_s_per_row_;
  if (emitting > 0) {
    b.lm_head_s = std::max(emitting * lm_head_.compute_s_per_token,
                           lm_head_.weight_s + emitting * lm_head_.act_s_per_token);
  }
  b.communication_s = tokens * (allreduce_s_per_token_ + transfer_s_per_token_) +
                      allreduce_latency_s_ + transfer_latency_s_;
  if (expert_parallel_ > 1) b.communication_s += num_moe_layers_ * AllToAllSeconds(tokens);
  return b;
}

double RooflineCostModel::GemmSeconds(const Gemm& g, double tokens) {
  return std::max(tokens * g.compute_s_per_token, g.weight_s + tokens * g.act_s_per_token);
}

double RooflineCostModel::RouterSeconds(double tokens) const {
  const Gemm& router = moe_dense_gemms_[0];
  return router.weight_s > 0 && tokens > 0 ? GemmSeconds(router, tokens) : 0.0;
}

double RooflineCostModel::AllToAllSeconds(double tokens) const {
  if (expert_parallel_ <= 1 || tokens <= 0) return 0;
  return tokens * routing_.per_token() * all_to_all_s_per_row_ + all_to_all_latency_s_;
}

double RooflineCostModel::AllReduceSeconds(double tokens) const {
  if (allreduce_call_s_per_token_ <= 0 || tokens <= 0) return 0;
  return tokens * allreduce_call_s_per_token_ + collective_latency_s_;
}

TimeNs RooflineCostModel::StepTime(const StepPlan& plan) const {
  return FromSeconds(Breakdown(plan).total_s());
}

StatusOr<std::unique_ptr<CostModel>> MakeRooflineCostModel(ParamReader& params,
                                                           const DeploymentSpec& deployment) {
  RooflineOptions o;
  o.gemm_efficiency = params.GetDouble("gemm_efficiency", o.gemm_efficiency, kOpenUnitInterval);
  o.attention_efficiency =
      params.GetDouble("attention_efficiency", o.attention_efficiency, kOpenUnitInterval);
  o.memory_efficiency =
      params.GetDouble("memory_efficiency", o.memory_efficiency, kOpenUnitInterval);
  o.interconnect_efficiency =
      params.GetDouble("interconnect_efficiency", o.interconnect_efficiency, kOpenUnitInterval);
  o.allreduce_latency_us =
      params.GetDouble("allreduce_latency_us", o.allreduce_latency_us, Bounds{0, 1e9});
  o.step_overhead_ms = params.GetDouble("step_overhead_ms", o.step_overhead_ms, Bounds{0, 1e6});
  auto routing = ReadExpertRoutingOptions(params);
  if (!routing.ok()) return routing.status();
  o.routing = *routing;
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  SERVELAB_RETURN_IF_ERROR(RooflineCostModel::Validate(deployment));
  return std::unique_ptr<CostModel>(std::make_unique<RooflineCostModel>(o, deployment));
}

}  // namespace servelab
