#include "sim/calibrated_cost_model.h"

#include <algorithm>

#include "core/params.h"
#include "sim/roofline_cost_model.h"

namespace servelab {
namespace {

// The roofline's form and efficiencies for an op no profile covered.
OpFit RooflineFit(Op op, const RooflineDefaults& d) {
  OpFit f;
  f.op = op;
  const bool attention = op == Op::kAttentionDecode || op == Op::kAttentionPrefill;
  f.memory_efficiency = op == Op::kAllReduce ? d.interconnect_efficiency : d.memory_efficiency;
  f.compute_efficiency = attention ? d.attention_efficiency : d.gemm_efficiency;
  f.causal_efficiency = f.compute_efficiency;
  f.fixed_us = op == Op::kAllReduce ? d.allreduce_latency_us : 0.0;
  return f;
}

}  // namespace

CalibratedCostModel::CalibratedCostModel(const CalibratedModel& model, const std::string& path,
                                         const DeploymentSpec& d, double step_overhead_ms,
                                         int64_t split_kv_length)
    : split_kv_length_(split_kv_length) {
  shape_.model = d.model;
  shape_.tensor_parallel = d.tensor_parallel;
  shape_.weight_dtype = d.weight_dtype;
  shape_.activation_dtype = d.activation_dtype;
  shape_.kv_dtype = d.kv_dtype;
  layers_ = d.model.num_hidden_layers;
  // A CPU fit is in absolute units (its nominal device); a GPU fit carries its
  // efficiencies to the deployment's GPU.
  const GpuSpec fitted_gpu = model.device == "cpu" ? *DeviceSpec("cpu") : d.gpu;
  const RooflineDefaults defaults;
  coefficients_.resize(AllOps().size());
  std::vector<std::string> fitted, roofline;
  for (const OpInfo& info : AllOps()) {
    auto it = model.ops.find(info.op);
    const bool has_fit = it != model.ops.end();
    const bool counted = has_fit || (info.canonical && info.op != Op::kSampling);
    if (counted) {
      coefficients_[static_cast<size_t>(info.op)] =
          has_fit ? it->second.On(fitted_gpu, shape_) : RooflineFit(info.op, defaults).On(d.gpu, shape_);
      (has_fit ? fitted : roofline).emplace_back(info.name);
    }
    if (!counted || info.op == Op::kAttentionDecode || info.op == Op::kAttentionPrefill) continue;
    if (info.op == Op::kAllReduce && d.tensor_parallel == 1) continue;
    if (info.scope == OpScope::kPerLayer) {
      per_layer_rows_.push_back(info.op);
    } else if (info.op == Op::kEmbedding) {
      per_step_rows_.push_back(info.op);
    } else {
      per_step_emit_.push_back(info.op);
    }
  }
  if (d.pipeline_parallel > 1 && d.gpu.interconnect_gbps > 0) {
    const RooflineOptions r;
    const double pp = d.pipeline_parallel;
    transfer_s_per_token_ = (pp - 1.0) * d.model.hidden_size * DTypeBytes(d.activation_dtype) /
                            (d.gpu.interconnect_gbps * 1e9 * r.interconnect_efficiency);
    transfer_latency_s_ = (pp - 1.0) * r.allreduce_latency_us * 1e-6;
  }
  if (model.SplitKvDecode()) split_kv_sms_ = d.gpu.sm_count;
  overhead_s_ = step_overhead_ms * 1e-3;
  description_ = "calibrated on " + model.device + " (" + path + "); fitted: " +
                 (fitted.empty() ? std::string("none") : Join(fitted, ", ")) +
                 "; roofline: " + (roofline.empty() ? std::string("none") : Join(roofline, ", "));
}

double CalibratedCostModel::OpsSeconds(const StepPlan& plan) const {
  double tokens = 0, emitting = 0;
  bool all_single = true;
  for (const ScheduledRequest& seq : plan.seqs) {
    const int32_t n = CostedNewTokens(seq);
    tokens += n;
    if (seq.emits_token || seq.is_padding) emitting += 1;
    all_single = all_single && n == 1;
  }
  if (tokens <= 0) return 0;  // swaps only: the backend times the copies
  OpWork attention;
  for (const ScheduledRequest& seq : plan.seqs) {
    const double n = CostedNewTokens(seq);
    const double cached = seq.num_computed_tokens;
    attention += all_single ? DecodeWork(shape_, cached) : PrefillWork(shape_, n, cached);
  }
  if (all_single && split_kv_sms_ > 0) {
    AddSplitKvWork(attention, shape_, split_kv_sms_, split_kv_length_,
                   static_cast<int64_t>(plan.seqs.size()),
                   [&](int64_t i) { return CostedContextLen(plan.seqs[static_cast<size_t>(i)]); });
  }
  double layer = OpSeconds(Of(all_single ? Op::kAttentionDecode : Op::kAttentionPrefill), attention);
  for (const Op op : per_layer_rows_) {
    const double calls = op == Op::kAllReduce ? 2.0 : 1.0;
    layer += calls * OpSeconds(Of(op), RowsWork(op, shape_, tokens));
  }
  double step = layers_ * layer;
  for (const Op op : per_step_rows_) step += OpSeconds(Of(op), RowsWork(op, shape_, tokens));
  if (emitting > 0) {
    for (const Op op : per_step_emit_) step += OpSeconds(Of(op), RowsWork(op, shape_, emitting));
  }
  return step + tokens * transfer_s_per_token_ + transfer_latency_s_;
}

TimeNs CalibratedCostModel::StepTime(const StepPlan& plan) const {
  return FromSeconds(OpsSeconds(plan) + overhead_s_);
}

StatusOr<std::unique_ptr<CostModel>> MakeCalibratedCostModel(ParamReader& params,
                                                             const DeploymentSpec& deployment) {
  const std::string path = params.GetPath("path");
  SERVELAB_RETURN_IF_ERROR(params.Error());
  if (deployment.model.IsMoe()) {
    return InvalidArgument("cost_model: the calibrated model has no mixture-of-experts "
                           "ops yet (" + deployment.model.name + " has " +
                           std::to_string(deployment.model.num_experts) +
                           " experts a layer); use the roofline");
  }
  if (deployment.model.IsMla()) {
    return InvalidArgument("cost_model: the calibrated model has no latent-attention ops yet (" +
                           deployment.model.name + " caches a " +
                           std::to_string(deployment.model.kv_lora_rank) +
                           "-rank latent); use the roofline");
  }
  auto model = ReadCalibratedModel(path);
  if (!model.ok()) return model.status();
  const bool split_kv = model->SplitKvDecode();
  if (split_kv && deployment.gpu.sm_count <= 0) {
    return InvalidArgument("cost_model: " + path + " fits attention_decode in the split_kv form, "
                           "which needs the GPU's SMs: hardware.gpu.sm_count (" +
                           deployment.gpu.name + " has none)");
  }
  // The default depends on the model file, so the resolved config records the value used.
  const double step_overhead_ms = params.GetDouble(
      "step_overhead_ms",
      model->has_step_overhead ? model->step_overhead_us * 1e-3 : RooflineOptions{}.step_overhead_ms,
      kNonNegative);
  // Read (so known) when it applies or was given; recorded in the resolved config only then.
  const int64_t split_kv_length = split_kv || params.Has("split_kv_length")
                                      ? params.GetInt("split_kv_length", 0, Bounds{0, 1 << 30})
                                      : 0;
  if (!split_kv && params.Has("split_kv_length")) {
    std::string where = params.Named().where;
    for (const Param& p : params.Named().params) {
      if (p.key == "split_kv_length") where = p.where;
    }
    return InvalidArgument(where + ": " + params.Named().path + ".split_kv_length: " + path +
                           " has no split_kv decode fit for it to apply to");
  }
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  return std::unique_ptr<CostModel>(std::make_unique<CalibratedCostModel>(
      *model, path, deployment, step_overhead_ms, split_kv_length));
}

}  // namespace servelab
