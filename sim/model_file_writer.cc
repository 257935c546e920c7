// MODEL.yaml written (model_file.h's CalibratedModelYaml); model_file.cc reads it.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/text.h"
#include "driver/config_yaml.h"
#include "sim/model_file.h"

namespace servelab {
namespace {

// A YAML number: FormatDouble, and .inf for an unbounded efficiency.
std::string YamlNumber(double v) { return std::isinf(v) ? ".inf" : FormatDouble(v); }

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

std::string CalibratedModelYaml(const CalibratedModel& model,
                                const std::map<std::string, ErrorStats>& in_sample) {
  std::ostringstream out;
  out << kCalibratedModelHeader
      << "# Per op, per layer (or per step) and per GPU:\n"
         "#   roofline ops: fixed_us + max(bytes / (bandwidth x memory_efficiency),\n"
         "#                                flops / (peak x compute_efficiency))\n"
         "#   stream ops:   fixed_us + bytes / (bandwidth x memory_efficiency)\n"
         "#   additive:     the roofline's terms summed, not max()ed (no overlap)\n"
         "#   split_kv:     decode attention as FlashAttention's split-KV grid runs it:\n"
         "#                 fixed_us + bytes / (bandwidth x memory_efficiency) + the\n"
         "#                 busiest SM's waves: wave_us each, and its CTAs' bytes at\n"
         "#                 bandwidth / SMs x pair_memory_efficiency (while two run\n"
         "#                 together in the first wave; their first pair_ramp_tokens at\n"
         "#                 pair_ramp_memory_efficiency) or cta_memory_efficiency (one\n"
         "#                 alone; each later wave's longest), +\n"
         "#                 combine_us + combine_per_split_us x splits when split, +\n"
         "#                 per_row_us a sequence (sim/op_model.h)\n"
         "#   servelab's own CUDA attention kernels, beside the form's terms:\n"
         "#                 per_cta_token_us a token the busiest SM's blocks walk in\n"
         "#                 turn, each kernel's blocks on the SMs' resident_ctas\n"
         "#                 slots each as they free (decode: its partitions,\n"
         "#                 sim/paged_decode_grid.h; prefill: its query tiles,\n"
         "#                 sim/paged_prefill_grid.h, or without resident_ctas the\n"
         "#                 longest context and chunk), and for decode reduce_us +\n"
         "#                 per_partition_us a partition merged; a mixed step's leading\n"
         "#                 decode rows on attention_decode, the rest on attention_prefill\n"
         "#   decode_step_overhead_us: a decode-only step's own (negative: replayed as\n"
         "#                 CUDA graphs, it launches none of the ops timed one by one)\n"
         "#   decode_graphs: true: those decode steps ran as the runner's graphs run\n"
         "#                 them, each op over the graph's padded rows and decode\n"
         "#                 attention launched for its context bucket\n"
         "#                 (kernels/decode_graph_shape.h); so the simulator prices them\n"
         "#   moe_mlp:      a MoE layer's MLP, its form + per_expert_us an expert run +\n"
         "#                 its one-row experts' bytes / (bandwidth x\n"
         "#                 single_row_expert_memory_efficiency)\n"
         "# with the work of sim/op_model.h and the peaks of `device` (a catalog GPU; for\n"
         "# cpu, 1 GB/s and 1 GFLOP/s). An efficiency marked `fitted: false` kept the\n"
         "# datasheet roofline's value: no measurement was bound by that term.\n"
         "# routing: per MoE shape, the routing its profile counted (experts_run), as\n"
         "# cost_model.routing_skew (from decode batches), routing_locality and\n"
         "# routing_favourites (from prefill chunks, at that skew): the default for a\n"
         "# model of that shape; a skew given to calibrate (--routing-skew: a serving\n"
         "# run's, from `validate`) says skew_given.\n"
         "# complete: the last line written; a file without it was cut short.\n";
  out << "device: " << model.device << "\n";
  out << "fitted_from:" << (model.fitted_from.empty() ? " []" : "") << "\n";
  for (const std::string& f : model.fitted_from) out << "  - " << YamlQuoted(f) << "\n";
  if (model.has_step_overhead) out << "step_overhead_us: " << FormatDouble(model.step_overhead_us) << "\n";
  if (model.has_decode_step_overhead) {
    out << "decode_step_overhead_us: " << FormatDouble(model.decode_step_overhead_us) << "\n";
  }
  if (model.decode_graphs) out << "decode_graphs: true\n";
  if (const auto& a = model.after_prefill) {
    out << "after_prefill:  # a decode-only step of B sequences k steps after a step with prompt tokens takes\n"
           "                # its settled time x (1 + slowdown(B) x exp(-(k - 1) / decay_steps)), slowdown\n"
           "                # interpolated in log(B) between the batches (sim/after_prefill.h)\n";
    std::vector<std::string> batches, slowdown;
    for (const int64_t b : a->batches) batches.push_back(std::to_string(b));
    for (const double s : a->slowdown) slowdown.push_back(FormatDouble(s));
    out << "  batches: [" << Join(batches, ", ") << "]\n";
    out << "  slowdown: [" << Join(slowdown, ", ") << "]\n";
    out << "  decay_steps: " << FormatDouble(a->decay_steps) << "\n";
    out << "  rows: " << a->rows << "  # " << kStepAfterPrefill << " rows fitted\n";
    out << "  prefill_tokens: [" << a->prefill_tokens_min << ", " << a->prefill_tokens_max
        << "]  # the chunks before their decodes\n";
    out << "  mape_pct: " << FormatDouble(a->mape_pct) << "\n";
    out << "  bias_pct: " << FormatDouble(a->bias_pct) << "\n";
  }
  if (!model.routing.empty()) out << "routing:\n";
  for (const CountedRouting& r : model.routing) {
    out << "  - num_experts: " << r.num_experts << "\n";
    out << "    experts_per_token: " << r.experts_per_token << "\n";
    out << "    hidden_size: " << r.hidden_size << "\n";
    out << "    expert_intermediate_size: " << r.expert_intermediate_size << "\n";
    out << "    routing_skew: " << FormatDouble(r.routing_skew) << "\n";
    if (r.skew_given) out << "    skew_given: true  # calibrate --routing-skew, not the profile's decode rows\n";
    out << "    routing_locality: " << FormatDouble(r.routing_locality) << "\n";
    out << "    routing_favourites: " << FormatDouble(r.routing_favourites) << "\n";
    out << "    decode_rows: " << r.decode_rows << "\n";
    out << "    chunk_rows: " << r.chunk_rows << "\n";
  }
  if (!model.gemm_corrections.empty()) {
    out << "gemm_corrections:  # measured / fitted time by rows (M), at the weight shapes [k, n]\n"
           "                   # measured, on `device` (sim/gemm_corrections.h)\n";
  }
  for (const GemmCorrection& c : model.gemm_corrections) {
    out << "  - op: " << InfoOf(c.op).name << "\n";
    out << "    k: " << c.k << "\n";
    out << "    n: " << c.n << "\n";
    std::vector<std::string> rows, factors;
    for (const int64_t m : c.rows) rows.push_back(std::to_string(m));
    for (const double f : c.factor) factors.push_back(FormatDouble(f));
    // One quoted scalar each: yaml-cpp reads 8,000 numbers as list items in ~35 ms, as
    // strings of numbers in ~4.
    out << "    rows: \"" << Join(rows, " ") << "\"\n";
    out << "    factor: \"" << Join(factors, " ") << "\"\n";
  }
  out << "ops:\n";
  for (const auto& [op, f] : model.ops) {
    const OpInfo& info = InfoOf(op);
    out << "  " << info.name << ":\n";
    out << "    form: " << f.FormName() << "\n";
    out << "    fixed_us: " << FormatDouble(f.fixed_us) << "\n";
    out << "    memory_efficiency: " << YamlNumber(f.memory_efficiency) << "\n";
    if (!f.memory_fitted) out << "    memory_fitted: false\n";
    if (info.form == OpForm::kRoofline) {
      out << "    compute_efficiency: " << YamlNumber(f.compute_efficiency) << "\n";
      if (!f.compute_fitted) out << "    compute_fitted: false\n";
    }
    if (op == Op::kAttentionPrefill) {
      out << "    causal_efficiency: " << YamlNumber(f.causal_efficiency) << "\n";
    }
    if (op == Op::kAttentionPrefill || op == Op::kAttentionDecode) {
      out << "    per_row_us: " << FormatDouble(f.per_row_us) << "\n";
    }
    if (f.per_cta_token_us > 0) {
      out << "    per_cta_token_us: " << FormatDouble(f.per_cta_token_us) << "\n";
    }
    if (f.resident_ctas > 0 && op == Op::kAttentionDecode) {
      out << "    reduce_us: " << FormatDouble(f.reduce_us) << "\n";
      out << "    per_partition_us: " << FormatDouble(f.per_partition_us) << "\n";
    }
    if (f.resident_ctas > 0) out << "    resident_ctas: " << f.resident_ctas << "\n";
    if (f.row_tile > 1) out << "    row_tile: " << f.row_tile << "\n";
    if (op == Op::kMoeMlp) {
      out << "    per_expert_us: " << FormatDouble(f.per_expert_us) << "\n";
      if (f.single_row_expert_memory_efficiency > 0) {
        out << "    single_row_expert_memory_efficiency: "
            << YamlNumber(f.single_row_expert_memory_efficiency) << "\n";
      }
    }
    if (f.split_kv) {
      out << "    cta_memory_efficiency: " << YamlNumber(f.cta_memory_efficiency) << "\n";
      out << "    pair_memory_efficiency: " << YamlNumber(f.pair_memory_efficiency) << "\n";
      out << "    pair_ramp_tokens: " << f.pair_ramp_tokens << "\n";
      if (f.pair_ramp_tokens > 0) {
        out << "    pair_ramp_memory_efficiency: " << YamlNumber(f.pair_ramp_memory_efficiency)
            << "\n";
      }
      out << "    wave_us: " << FormatDouble(f.wave_us) << "\n";
      out << "    combine_us: " << FormatDouble(f.combine_us) << "\n";
      out << "    combine_per_split_us: " << FormatDouble(f.combine_per_split_us) << "\n";
    }
    if (f.cache_bytes > 0) {
      out << "    cache_bytes: " << FormatDouble(f.cache_bytes) << "\n";
      out << "    beyond_cache_memory_efficiency: "
          << YamlNumber(f.beyond_cache_memory_efficiency) << "\n";
    }
    out << "    points: " << f.points << "\n";
    if (f.single_row_fitted) {
      out << "    single_row:  # one-row products: the matrix-vector kernel\n";
      out << "      fixed_us: " << FormatDouble(f.single_row_fixed_us) << "\n";
      out << "      memory_efficiency: " << YamlNumber(f.single_row_memory_efficiency) << "\n";
      out << "      points: " << f.single_row_points << "\n";
    }
    auto it = in_sample.find(std::string(info.name));
    if (it != in_sample.end() && std::isfinite(it->second.mape)) {
      out << "    in_sample_mape_pct: " << Percent(it->second.mape) << "\n";
    }
  }
  out << "complete: true\n";
  return out.str();
}

}  // namespace servelab
