#include "sim/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/percentile.h"
#include "driver/gpu_catalog.h"
#include "sim/fit_evaluation.h"
#include "sim/op_fitting.h"
#include "sim/paged_decode_grid.h"
#include "sim/paged_prefill_grid.h"
#include "sim/split_kv_grid.h"

namespace servelab {

using calibration_internal::Coefficients;
using calibration_internal::FitAdditive;
using calibration_internal::FitCached;
using calibration_internal::FitOp;
using calibration_internal::FitResult;
using calibration_internal::FitSingleRow;
using calibration_internal::FitSplitKv;
using calibration_internal::Objective;
using calibration_internal::Sample;
using calibration_internal::ScoredFit;

OpShape ProfileRowShape(const ProfileRow& row) {
  OpShape shape;
  shape.model = row.shape;
  shape.tensor_parallel = row.tp;
  return shape;
}

StatusOr<GpuSpec> DeviceSpec(const std::string& device) {
  if (device == "cpu") {
    GpuSpec cpu;
    cpu.name = "cpu";
    cpu.mem_bandwidth_gbps = 1.0;
    cpu.bf16_tflops = 1e-3;
    cpu.fp32_tflops = 1e-3;
    cpu.interconnect_gbps = 1.0;
    return cpu;
  }
  auto gpu = FindGpu(device);
  if (!gpu.ok()) return InvalidArgument("device '" + device + "': " + gpu.status().message());
  return *gpu;
}

bool ServelabGpuKernels(const ProfileRow& row, const GpuSpec& gpu) {
  return gpu.sm_count > 0 && row.attention_backend.empty();
}

OpWork ProfileRowWork(Op op, const ProfileRow& row, const GpuSpec& gpu,
                      std::span<const CountedRouting> routing, int32_t resident_ctas) {
  const OpShape shape = ProfileRowShape(row);
  if (op == Op::kMoeMlp && row.experts_run > 0) {  // the routing the engine counted
    const double tokens = static_cast<double>(row.tokens);
    return MoeMlpWork(shape, tokens, 1, tokens * shape.model.num_experts_per_tok, row.experts_run,
                      row.single_row_experts);
  }
  if (op == Op::kMoeMlp && (row.batch == 1 || row.batch == row.tokens)) {
    for (const CountedRouting& counted : routing) {
      if (!counted.Matches(row.shape)) continue;
      const ExpertRouting model(counted.num_experts, counted.experts_per_token, 1, counted.Options());
      return MoeMlpWork(shape, model.Sequences(row.batch, row.tokens / row.batch), model);
    }
  }
  OpWork work = ProfiledWork(op, shape, static_cast<double>(row.tokens),
                             static_cast<double>(row.batch), static_cast<double>(row.context));
  if (op == Op::kAttentionDecode) {
    AddSplitKvWork(work, shape, gpu.sm_count, row.kv_capacity, row.batch,
                   [&](int64_t) { return row.context + 1; });
  }
  if (ServelabGpuKernels(row, gpu)) {
    if (op == Op::kAttentionPrefill) {
      AddPagedPrefillGridWork(work, shape, gpu.sm_count, resident_ctas, 1,
                              [&](int64_t) { return PrefillChunk{row.tokens, row.context}; });
    }
    if (op == Op::kAttentionDecode) {
      AddPagedDecodeGridWork(work, shape, gpu.sm_count, resident_ctas, row.batch,
                             [&](int64_t) { return row.context + 1; });
    }
  }
  return work;
}

std::string_view OpFit::FormName() const {
  if (InfoOf(op).form == OpForm::kStream) return "stream";
  if (split_kv) return "split_kv";
  return additive ? "additive" : "roofline";
}

OpCoefficients OpFit::On(const GpuSpec& gpu, const OpShape& shape) const {
  const OpPeaks peaks = PeaksOf(op, gpu, shape);
  OpCoefficients c;
  c.fixed_s = fixed_us * 1e-6;
  c.additive = additive;
  c.row_tile = row_tile;
  if (cache_bytes > 0 && beyond_cache_memory_efficiency > 0) {
    c.cache_bytes = cache_bytes;
    c.s_per_byte_beyond_cache = 1.0 / (peaks.bytes_per_s * beyond_cache_memory_efficiency);
  }
  c.s_per_byte = memory_efficiency > 0 ? 1.0 / (peaks.bytes_per_s * memory_efficiency) : 0;
  if (InfoOf(op).form == OpForm::kRoofline) {
    if (compute_efficiency > 0) c.s_per_flop = 1.0 / (peaks.flops_per_s * compute_efficiency);
    if (causal_efficiency > 0) c.s_per_causal_flop = 1.0 / (peaks.flops_per_s * causal_efficiency);
    c.s_per_row = per_row_us * 1e-6;
  }
  if (split_kv && gpu.sm_count > 0) {
    // Efficiencies of one SM's share of the bandwidth: one CTA's rate alone, two CTAs'
    // together.
    const double sm_bytes_per_s = peaks.bytes_per_s / gpu.sm_count;
    c.s_per_cta_byte = 1.0 / (sm_bytes_per_s * cta_memory_efficiency);
    c.s_per_pair_byte = 2.0 / (sm_bytes_per_s * pair_memory_efficiency);
    if (pair_ramp_tokens > 0 && pair_ramp_memory_efficiency > 0) {
      c.pair_ramp_tokens = static_cast<double>(pair_ramp_tokens);
      c.s_per_pair_ramp_byte = 2.0 / (sm_bytes_per_s * pair_ramp_memory_efficiency);
    }
    c.s_per_wave = wave_us * 1e-6;
    c.combine_s = combine_us * 1e-6;
    c.combine_s_per_split = combine_per_split_us * 1e-6;
  }
  c.s_per_cta_token = per_cta_token_us * 1e-6;
  c.reduce_s = reduce_us * 1e-6;
  c.s_per_partition = per_partition_us * 1e-6;
  c.s_per_expert = per_expert_us * 1e-6;
  if (single_row_expert_memory_efficiency > 0) {
    c.s_per_single_row_expert_byte = 1.0 / (peaks.bytes_per_s * single_row_expert_memory_efficiency);
  }
  if (single_row_fitted) {
    c.has_single_row = true;
    c.single_row_fixed_s = single_row_fixed_us * 1e-6;
    c.single_row_s_per_byte = 1.0 / (peaks.bytes_per_s * single_row_memory_efficiency);
  }
  return c;
}

OpFit RooflineFit(Op op, const RooflineOptions& roofline) {
  OpFit f;
  f.op = op;
  const bool attention = op == Op::kAttentionDecode || op == Op::kAttentionPrefill;
  const bool link = op == Op::kAllReduce;
  f.memory_efficiency = link ? roofline.interconnect_efficiency : roofline.memory_efficiency;
  f.compute_efficiency = attention ? roofline.attention_efficiency : roofline.gemm_efficiency;
  f.causal_efficiency = f.compute_efficiency;
  f.fixed_us = link ? roofline.allreduce_latency_us : 0.0;
  return f;
}

StatusOr<CalibratedModel> FitProfiles(const std::vector<ProfileTable>& tables,
                                      const FitOptions& options) {
  CalibratedModel model;
  std::map<Op, std::vector<const ProfileRow*>> by_op;
  std::vector<const ProfileRow*> steps;
  for (const ProfileTable& table : tables) {
    model.fitted_from.push_back(table.path);
    for (const ProfileRow& row : table.rows) {
      if (model.device.empty()) model.device = row.device;
      if (row.device != model.device) {
        return InvalidArgument(table.path + ":" + std::to_string(row.line) + ": device '" +
                               row.device + "' differs from '" + model.device +
                               "': fit one device at a time");
      }
      if (row.op == "step") {  // whole steps: for the step overhead (below)
        if (row.shape.num_hidden_layers > 0 && row.median_ms > 0) steps.push_back(&row);
        continue;
      }
      if (row.op == kStepAfterPrefill) continue;  // FitAfterPrefill's (below)
      if (row.median_ms <= 0) continue;  // no relative error to weigh
      by_op[*OpByName(row.op)].push_back(&row);
    }
  }
  auto gpu = DeviceSpec(model.device);
  if (!gpu.ok()) return gpu.status();
  model.routing = CountedRoutingOf(tables, options.routing_skew);
  auto after_prefill = FitAfterPrefill(tables);
  if (!after_prefill.ok()) return after_prefill.status();
  model.after_prefill = *after_prefill;
  for (const auto& [op, rows] : by_op) {
    const OpInfo& info = InfoOf(op);
    // moe_mlp also has its cost per expert run and its one-row experts' rate.
    const int32_t coefficients = (info.form == OpForm::kRoofline ? 3 : 2) + (op == Op::kMoeMlp ? 2 : 0);
    std::set<double> sizes;
    std::vector<Sample> samples, single_row;
    OpShape first = ProfileRowShape(*rows.front());
    for (const ProfileRow* r : rows) {
      Sample s;
      s.t = r->median_ms * 1e-3;
      s.work = ProfileRowWork(op, *r, *gpu, model.routing);
      (s.work.single_row ? single_row : samples).push_back(s);
    }
    const auto needed = static_cast<size_t>(coefficients * options.min_points_per_coefficient);
    if (single_row.size() < static_cast<size_t>(options.min_points_per_coefficient) ||
        samples.size() < needed) {
      samples.insert(samples.end(), single_row.begin(), single_row.end());
      single_row.clear();
    }
    for (const Sample& s : samples) sizes.insert(s.work.bytes);
    if (samples.size() < needed || sizes.size() < static_cast<size_t>(options.min_distinct_sizes)) {
      return InvalidArgument("op " + std::string(info.name) + ": " +
                             std::to_string(samples.size()) + " measurements of " +
                             std::to_string(sizes.size()) + " distinct sizes; fitting its " +
                             std::to_string(coefficients) + " coefficients needs at least " +
                             std::to_string(needed) + " measurements of " +
                             std::to_string(options.min_distinct_sizes) +
                             " sizes: measure more sizes or leave the op to the roofline");
    }
    const OpFit roofline = RooflineFit(op, options.defaults);
    const double memory_default = roofline.memory_efficiency;
    const double compute_default = roofline.compute_efficiency;
    const OpPeaks peaks = PeaksOf(op, *gpu, first);
    Coefficients start;
    start.fixed_s = roofline.fixed_us * 1e-6;
    start.s_per_byte = 1.0 / (peaks.bytes_per_s * memory_default);
    start.s_per_flop =
        info.form == OpForm::kRoofline ? 1.0 / (peaks.flops_per_s * compute_default) : 0.0;
    start.s_per_causal_flop = start.s_per_flop;
    // A tie (within rounding: 1e-9 of squared relative error per row) keeps the simpler
    // model: the max() form, the smaller tile.
    const double tolerance = 1e-9 * static_cast<double>(samples.size());
    auto fit_form = [&](const std::vector<Sample>& rows_fitted) {
      FitResult best = FitOp(info.form, rows_fitted, start);
      if (info.form == OpForm::kRoofline) {
        const FitResult additive = FitAdditive(rows_fitted, start);
        if (Objective(additive.c, rows_fitted) < Objective(best.c, rows_fitted) - tolerance) {
          best = additive;
        }
      }
      return best;
    };
    FitResult fit = fit_form(samples);
    // Attention on servelab's own kernels: their grids' count needs the blocks an SM runs
    // at once, which registers (decode) or shared memory (prefill) decide; each count from
    // 1 to 8 is tried against none (decode: no grid, rows whose times show none keep the
    // plain form; prefill: its longest walk, no waiting for slots), the one that explains
    // the rows best kept (a tie: none, else the fewest).
    int32_t resident_ctas = 0;
    const auto own_kernel = [&](const ProfileRow* r) { return ServelabGpuKernels(*r, *gpu); };
    if ((op == Op::kAttentionDecode || op == Op::kAttentionPrefill) &&
        std::all_of(rows.begin(), rows.end(), own_kernel)) {
      double best_objective = Objective(fit.c, samples);
      for (int32_t resident = 1; resident <= kMaxResidentCtas; ++resident) {
        std::vector<Sample> counted;
        for (const ProfileRow* r : rows) {
          counted.push_back(Sample{r->median_ms * 1e-3, ProfileRowWork(op, *r, *gpu, model.routing, resident)});
        }
        const FitResult candidate = fit_form(counted);
        const double objective = Objective(candidate.c, counted);
        if (objective < best_objective - tolerance) {
          best_objective = objective;
          fit = candidate;
          resident_ctas = resident;
          samples = std::move(counted);
        }
      }
    }
    if (info.form == OpForm::kStream) {
      const ScoredFit two_tier = FitCached(samples);
      if (two_tier.objective < Objective(fit.c, samples) - tolerance) {
        fit = FitResult{two_tier.c, true, false};
      }
    }
    int32_t row_tile = 1;
    if (IsGemm(op)) {
      double best_objective = Objective(fit.c, samples);
      for (int32_t tile = 2; tile <= 128; tile *= 2) {
        std::vector<Sample> tiled = samples;
        for (Sample& t : tiled) t.work = TileQuantized(t.work, tile);
        const FitResult candidate = fit_form(tiled);
        const double objective = Objective(candidate.c, tiled);
        if (objective < best_objective - tolerance) {
          best_objective = objective;
          fit = candidate;
          row_tile = tile;
        }
      }
    }
    // The split-KV form: fixed, bytes, the grid's CTA bytes in a paired first wave and in
    // single ones, its waves and its combine kernel, one non-negative least squares; kept when
    // both CTA rates are identified (the rows have waves of each kind) and it explains the
    // rows better. Only for rows FlashAttention ran: servelab's own CUDA decode partitions
    // by a rule of its own (kernels/cuda/kernels.h), which this form does not count.
    bool split_kv = false;
    const auto flash_attention = [](const ProfileRow* r) {
      return r->attention_backend.find("FLASH_ATTENTION") != std::string::npos;
    };
    if (op == Op::kAttentionDecode && gpu->sm_count > 0 &&
        std::all_of(rows.begin(), rows.end(), flash_attention)) {
      const ScoredFit grid = FitSplitKv(samples, tolerance);
      if (grid.objective < Objective(fit.c, samples) - tolerance) {
        fit = FitResult{grid.c, grid.c.s_per_byte > 0, false};
        split_kv = true;
      }
    }
    OpFit f;
    f.op = op;
    f.row_tile = row_tile;
    if (split_kv) {
      f.split_kv = true;
      const double sm_bytes_per_s = peaks.bytes_per_s / gpu->sm_count;
      f.cta_memory_efficiency = 1.0 / (fit.c.s_per_cta_byte * sm_bytes_per_s);
      f.pair_memory_efficiency = 2.0 / (fit.c.s_per_pair_byte * sm_bytes_per_s);
      if (fit.c.pair_ramp_tokens > 0) {
        f.pair_ramp_tokens = static_cast<int64_t>(fit.c.pair_ramp_tokens);
        f.pair_ramp_memory_efficiency = 2.0 / (fit.c.s_per_pair_ramp_byte * sm_bytes_per_s);
      }
      f.wave_us = fit.c.s_per_wave * 1e6;
      f.combine_us = fit.c.combine_s * 1e6;
      f.combine_per_split_us = fit.c.combine_s_per_split * 1e6;
    }
    if (fit.c.cache_bytes > 0) {
      f.cache_bytes = fit.c.cache_bytes;
      f.beyond_cache_memory_efficiency = 1.0 / (fit.c.s_per_byte_beyond_cache * peaks.bytes_per_s);
    }
    f.points = static_cast<int64_t>(samples.size());
    if (IsGemm(op)) {
      std::set<double> weights;
      for (const ProfileRow* r : rows) weights.insert(RowsWork(op, ProfileRowShape(*r), 0).bytes);
      f.weight_sizes = static_cast<int64_t>(weights.size());
    }
    if (!single_row.empty()) {
      const Coefficients gemv =
          FitSingleRow(single_row, start, options.min_distinct_sizes);
      f.single_row_fitted = true;
      f.single_row_fixed_us = gemv.fixed_s * 1e6;
      f.single_row_memory_efficiency = 1.0 / (gemv.s_per_byte * peaks.bytes_per_s);
      f.single_row_points = static_cast<int64_t>(single_row.size());
    }
    f.fixed_us = fit.c.fixed_s * 1e6;
    f.additive = fit.c.additive;
    f.per_cta_token_us = fit.c.s_per_cta_token * 1e6;
    f.reduce_us = fit.c.reduce_s * 1e6;
    f.per_partition_us = fit.c.s_per_partition * 1e6;
    f.resident_ctas = resident_ctas;
    const double unbounded = std::numeric_limits<double>::infinity();
    f.memory_efficiency = fit.memory_fitted ? 1.0 / (fit.c.s_per_byte * peaks.bytes_per_s)
                          : f.additive      ? unbounded
                                            : memory_default;
    f.memory_fitted = fit.memory_fitted || f.additive;
    if (info.form == OpForm::kRoofline) {
      f.compute_efficiency = fit.compute_fitted ? 1.0 / (fit.c.s_per_flop * peaks.flops_per_s)
                             : f.additive       ? unbounded
                                                : compute_default;
      f.compute_fitted = fit.compute_fitted || f.additive;
      if (op == Op::kAttentionPrefill) {
        const double yc = fit.c.s_per_causal_flop;
        f.causal_efficiency = yc > 0       ? 1.0 / (yc * peaks.flops_per_s)
                              : f.additive ? unbounded
                                           : compute_default;
      }
      f.per_row_us = fit.c.s_per_row * 1e6;  // attention only (other ops have no rows)
    }
    f.per_expert_us = fit.c.s_per_expert * 1e6;  // moe_mlp only (other ops run no experts)
    if (fit.c.s_per_single_row_expert_byte > 0) {
      f.single_row_expert_memory_efficiency =
          1.0 / (fit.c.s_per_single_row_expert_byte * peaks.bytes_per_s);
    }
    model.ops[op] = f;
  }
  if (model.ops.empty()) return InvalidArgument("no op measurements to fit");
  if (options.gemm_corrections) {
    std::vector<GemmRatio> ratios;
    for (const auto& [op, rows] : by_op) {
      if (!IsGemm(op)) continue;
      for (const ProfileRow* r : rows) {
        const OpWork w = ProfileRowWork(op, *r, *gpu, model.routing);
        // One-row products with a matrix-vector fit of their own: another kernel, whose
        // form is fitted on its own rows (and not interpolated with the GEMM's).
        if (w.single_row && model.ops.at(op).single_row_fitted) continue;
        // A shape split unevenly over TP (vocab / tp) is no whole matrix to key.
        if (w.gemm_k != std::floor(w.gemm_k) || w.gemm_n != std::floor(w.gemm_n)) continue;
        const double fitted = PredictRow(model, *gpu, op, *r, GemmCorrectionUse::kNone);
        if (fitted <= 0) continue;
        ratios.push_back(GemmRatio{op, std::llround(w.gemm_k), std::llround(w.gemm_n),
                                   std::llround(w.gemm_rows), r->median_ms * 1e-3 / fitted});
      }
    }
    model.gemm_corrections = GemmCorrectionsOf(std::move(ratios), options.min_distinct_sizes);
  }
  std::vector<double> residuals, decode_residuals;
  // Decode steps run as CUDA graphs, each as StepGraphOf says (as its row records it, or,
  // on a row that does not say, of servelab's own CUDA kernels); the model keeps
  // decode_graphs when any did (below).
  model.decode_graphs = true;
  for (const ProfileRow* row : steps) {
    const double residual = row->median_ms * 1e-3 - PredictOps(model, *gpu, *row);
    (StepGraphOf(model, *gpu, *row) ? decode_residuals : residuals).push_back(residual);
  }
  if (!residuals.empty()) {
    std::sort(residuals.begin(), residuals.end());
    model.has_step_overhead = true;
    model.step_overhead_us = std::max(0.0, PercentileOfSorted(residuals, 50)) * 1e6;
  }
  if (decode_residuals.empty()) model.decode_graphs = false;
  if (!decode_residuals.empty()) {
    std::sort(decode_residuals.begin(), decode_residuals.end());
    model.has_decode_step_overhead = true;
    model.decode_step_overhead_us = PercentileOfSorted(decode_residuals, 50) * 1e6;
    if (!model.has_step_overhead) {  // decode steps alone: the others' stays the default
      model.has_step_overhead = true;
      model.step_overhead_us = std::max(0.0, model.decode_step_overhead_us);
    }
  }
  return model;
}

}  // namespace servelab
