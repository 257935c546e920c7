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
//              (pp - 1) stage transfers of the roofline, and a fixed step overhead.
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
//   split_kv_length   tokens; with a split_kv decode fit, the KV length FlashAttention
//                     splits: 0 (default) the batch's longest sequence (vLLM's
//                     max_seqlen_k), or a fixed allocation (Vidur's profiler gave it
//                     max_model_len)
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/calibration.h"
#include "sim/cost_model.h"

namespace servelab {

class CalibratedCostModel final : public CostModel {
 public:
  CalibratedCostModel(const CalibratedModel& model, const std::string& path,
                      const DeploymentSpec& deployment, double step_overhead_ms,
                      int64_t split_kv_length = 0);

  std::string_view Name() const override { return "calibrated"; }
  TimeNs StepTime(const StepPlan& plan) const override;
  std::string Describe() const override { return description_; }
  // Seconds, for tests: the step without its overhead.
  double OpsSeconds(const StepPlan& plan) const;

 private:
  const OpCoefficients& Of(Op op) const { return coefficients_[static_cast<size_t>(op)]; }

  OpShape shape_;
  int32_t layers_ = 0;
  int32_t split_kv_sms_ = 0;  // > 0: decode attention counts the split-KV grid on these SMs
  int64_t split_kv_length_ = 0;  // the KV length it splits; 0: the longest sequence's
  std::vector<OpCoefficients> coefficients_;  // by Op
  std::vector<Op> per_layer_rows_;  // token-scaled per-layer ops
  std::vector<Op> per_step_rows_;   // T-scaled: embedding
  std::vector<Op> per_step_emit_;   // E-scaled: final_norm, lm_head, sampling
  double transfer_s_per_token_ = 0, transfer_latency_s_ = 0;
  double overhead_s_ = 0;
  std::string description_;
};

StatusOr<std::unique_ptr<CostModel>> MakeCalibratedCostModel(ParamReader& params,
                                                             const DeploymentSpec& deployment);

}  // namespace servelab
