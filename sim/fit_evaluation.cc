#include "sim/fit_evaluation.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "kernels/decode_graph_shape.h"
#include "sim/paged_decode_grid.h"

namespace servelab {

double PredictRow(const CalibratedModel& model, const GpuSpec& gpu, Op op, const ProfileRow& row,
                  GemmCorrectionUse use) {
  const OpFit& fit = model.ops.at(op);
  const OpWork work = ProfileRowWork(op, row, gpu, model.routing, fit.resident_ctas);
  const double form = OpSeconds(fit.On(gpu, ProfileRowShape(row)), work);
  if (use == GemmCorrectionUse::kNone || !IsGemm(op) || gpu.name != model.device ||
      (work.single_row && model.ops.at(op).single_row_fitted)) {
    return form;
  }
  const GemmCorrection* c = FindGemmCorrection(model.gemm_corrections, op, work.gemm_k, work.gemm_n);
  if (c == nullptr) return form;
  return form * (use == GemmCorrectionUse::kLeaveOneOut ? c->LeaveOneOut(work.gemm_rows)
                                                        : c->At(work.gemm_rows));
}

std::optional<StepGraph> StepGraphOf(const CalibratedModel& model, const GpuSpec& gpu, const ProfileRow& row) {
  if (!model.decode_graphs || row.op != "step" || row.tokens != row.batch) return std::nullopt;
  if (row.GraphRecorded()) {
    if (row.graph_rows == 0) return std::nullopt;
    return StepGraph{row.graph_rows, row.graph_context};
  }
  if (!ServelabGpuKernels(row, gpu)) return std::nullopt;
  constexpr int64_t kMax = INT32_MAX;
  return StepGraph{kernels::DecodeGraphBatch(static_cast<int32_t>(std::min(row.batch, kMax)), 0),
                   kernels::DecodeGraphContextBucket(static_cast<int32_t>(std::min(row.context + 1, kMax)), 0)};
}

namespace {

// Decode attention of a step `row` as its CUDA graph runs it (kernels/decode_graph_shape.h):
// the row's sequences, the padding up to the graph's rows attending one position each,
// the launch's partitions for its context bucket.
double GraphDecodeAttentionSeconds(const CalibratedModel& model, const GpuSpec& gpu, const ProfileRow& row,
                                   const StepGraph& graph) {
  const OpFit& fit = model.ops.at(Op::kAttentionDecode);
  const OpShape shape = ProfileRowShape(row);
  const auto batch = static_cast<double>(row.batch);
  const auto padding = static_cast<double>(graph.rows - row.batch);
  OpWork work = ProfiledWork(Op::kAttentionDecode, shape, batch, batch, static_cast<double>(row.context));
  if (padding > 0) work += ProfiledWork(Op::kAttentionDecode, shape, padding, padding, 0);
  AddDecodeGraphLaunchWork(work, shape, gpu.sm_count, fit.resident_ctas, row.batch, graph.rows,
                           [&](int64_t) { return row.context + 1; },
                           static_cast<int32_t>(std::min<int64_t>(graph.context_bucket, INT32_MAX)));
  return OpSeconds(fit.On(gpu, shape), work);
}

}  // namespace

double PredictOps(const CalibratedModel& model, const GpuSpec& gpu, const ProfileRow& row) {
  const bool decode = row.tokens == row.batch;  // every sequence brings one token
  // A decode step of the runner's graphs: every op over the graph's padded rows.
  const std::optional<StepGraph> graph = StepGraphOf(model, gpu, row);
  ProfileRow padded = row;
  if (graph) padded.tokens = padded.batch = graph->rows;
  double layer = 0, step = 0;
  for (const auto& entry : model.ops) {
    const Op op = entry.first;
    // A MoE layer's MLP is moe_mlp, a dense one's its three ops.
    if (row.shape.IsMoe() ? IsDenseMlp(op) : op == Op::kMoeMlp) continue;
    if (op == Op::kAttentionDecode || op == Op::kAttentionPrefill) {
      if ((op == Op::kAttentionDecode) != decode) continue;
      layer += graph ? GraphDecodeAttentionSeconds(model, gpu, row, *graph) : PredictRow(model, gpu, op, row);
    } else if (InfoOf(op).scope == OpScope::kPerLayer) {
      if (op == Op::kAllReduce && row.tp == 1) continue;
      const double calls = op == Op::kAllReduce ? 2.0 : 1.0;
      layer += calls * PredictRow(model, gpu, op, padded);
    } else {
      step += PredictRow(model, gpu, op, padded);
    }
  }
  return step + layer * row.shape.num_hidden_layers;
}

ErrorStats ErrorStats::Of(std::span<const double> relative_errors) {
  ErrorStats s;
  s.points = static_cast<int64_t>(relative_errors.size());
  for (double r : relative_errors) {
    s.mape += std::abs(r);
    s.bias += r;
    s.max_error = std::max(s.max_error, std::abs(r));
  }
  if (s.points > 0) {
    s.mape *= 100.0 / static_cast<double>(s.points);
    s.bias *= 100.0 / static_cast<double>(s.points);
  }
  s.max_error *= 100.0;
  return s;
}

namespace {

// Per-layer totals (Evaluation::total): measured and predicted sums by configuration.
struct Sums {
  double measured = 0, predicted = 0;
};
// A measured configuration: tokens, batch, context, tp, then the whole model shape.
using ConfigKey = std::tuple<int64_t, int64_t, int64_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t,
                             int32_t, int32_t, int32_t, int32_t, int32_t>;

ConfigKey KeyOf(const ProfileRow& row) {
  const ModelSpec& m = row.shape;
  return ConfigKey{row.tokens, row.batch, row.context, row.tp, m.hidden_size, m.num_attention_heads,
                   m.num_key_value_heads, m.head_dim, m.intermediate_size, m.vocab_size, m.num_experts,
                   m.num_experts_per_tok, m.moe_intermediate_size, m.shared_expert_intermediate_size};
}

void SetTotals(const std::map<ConfigKey, Sums>& totals, ErrorStats& total,
               std::map<int32_t, ErrorStats>& by_tp) {
  std::vector<double> all;
  std::map<int32_t, std::vector<double>> tp_rel;
  for (const auto& [key, s] : totals) {
    const double rel = (s.predicted - s.measured) / s.measured;
    all.push_back(rel);
    tp_rel[std::get<3>(key)].push_back(rel);
  }
  total = ErrorStats::Of(all);
  for (const auto& [tp, rel] : tp_rel) by_tp[tp] = ErrorStats::Of(rel);
}

}  // namespace

StatusOr<Evaluation> Evaluate(const CalibratedModel& model, const ProfileTable& table) {
  Evaluation e;
  e.file = table.path;
  e.device = table.rows.empty() ? model.device : table.rows.front().device;
  auto gpu = DeviceSpec(e.device);
  if (!gpu.ok()) return gpu.status();
  // op -> signed relative errors, as the model predicts and by the form alone
  std::map<std::string, std::vector<double>> errors, form_errors, loo_errors;
  // as the model predicts, by the form alone, leave-one-out
  std::map<ConfigKey, Sums> totals, form_totals, loo_totals;
  std::set<std::string> missing;
  std::set<std::tuple<Op, double, double>> gemm_shapes, corrected_shapes;  // (op, K, N)
  std::vector<double> step_rel;
  for (const ProfileRow& row : table.rows) {
    // One GPU's peaks for the whole file (and its corrections on or off for all of it).
    if (row.device != e.device) {
      return InvalidArgument(table.path + ":" + std::to_string(row.line) + ": device '" + row.device +
                             "' differs from the file's first row's ('" + e.device +
                             "'): evaluate one device a file");
    }
    if (row.op == "step" && row.shape.num_hidden_layers > 0 && row.median_ms > 0) {
      const double predicted_ms =
          1e3 * PredictOps(model, *gpu, row) + 1e-3 * model.StepOverheadUs(StepGraphOf(model, *gpu, row).has_value());
      step_rel.push_back((predicted_ms - row.median_ms) / row.median_ms);
      e.points.push_back(PointPrediction{row.op, row.tokens, row.batch, row.context, row.tp,
                                         row.median_ms, predicted_ms, predicted_ms, predicted_ms});
    }
    if (row.op == "step" || row.op == kStepAfterPrefill || row.median_ms <= 0) continue;
    const Op op = *OpByName(row.op);
    if (model.ops.count(op) == 0) {
      missing.insert(row.op);
      continue;
    }
    const double predicted_ms = 1e3 * PredictRow(model, *gpu, op, row);
    const double form_ms = 1e3 * PredictRow(model, *gpu, op, row, GemmCorrectionUse::kNone);
    const double loo_ms = 1e3 * PredictRow(model, *gpu, op, row, GemmCorrectionUse::kLeaveOneOut);
    e.corrected = e.corrected || predicted_ms != form_ms;
    if (IsGemm(op)) {
      const OpWork w = ProfileRowWork(op, row, *gpu, model.routing);
      const std::tuple<Op, double, double> shape{op, w.gemm_k, w.gemm_n};
      gemm_shapes.insert(shape);
      if (predicted_ms != form_ms) corrected_shapes.insert(shape);
    }
    errors[row.op].push_back((predicted_ms - row.median_ms) / row.median_ms);
    form_errors[row.op].push_back((form_ms - row.median_ms) / row.median_ms);
    loo_errors[row.op].push_back((loo_ms - row.median_ms) / row.median_ms);
    e.points.push_back(PointPrediction{row.op, row.tokens, row.batch, row.context, row.tp,
                                       row.median_ms, predicted_ms, form_ms, loo_ms});
    if (InfoOf(op).scope == OpScope::kPerLayer) {
      const ConfigKey key = KeyOf(row);
      for (auto [sums, predicted] : {std::pair{&totals, predicted_ms}, std::pair{&form_totals, form_ms},
                                     std::pair{&loo_totals, loo_ms}}) {
        Sums& s = (*sums)[key];
        s.measured += row.median_ms;
        s.predicted += predicted;
      }
    }
  }
  for (const auto& [op, rel] : errors) e.ops[op] = ErrorStats::Of(rel);
  for (const auto& [op, rel] : form_errors) e.ops_form[op] = ErrorStats::Of(rel);
  for (const auto& [op, rel] : loo_errors) e.ops_leave_one_out[op] = ErrorStats::Of(rel);
  SetTotals(totals, e.total, e.total_by_tp);
  SetTotals(form_totals, e.total_form, e.total_form_by_tp);
  SetTotals(loo_totals, e.total_leave_one_out, e.total_leave_one_out_by_tp);
  e.step = ErrorStats::Of(step_rel);
  e.not_modelled.assign(missing.begin(), missing.end());
  e.gemm_shapes = static_cast<int64_t>(gemm_shapes.size());
  e.corrected_gemm_shapes = static_cast<int64_t>(corrected_shapes.size());
  return e;
}

}  // namespace servelab
