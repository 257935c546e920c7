// `servelab calibrate`'s reports (calibration_report.h).
#include "cli/calibration_report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/text.h"
#include "driver/csv_writer.h"

namespace servelab {
namespace {

nlohmann::ordered_json StatsJson(const ErrorStats& s) {
  nlohmann::ordered_json j;
  j["points"] = s.points;
  j["mape"] = s.mape;
  j["max_error"] = s.max_error;
  j["bias"] = s.bias;
  return j;
}

nlohmann::ordered_json EvaluationJson(const Evaluation& e) {
  nlohmann::ordered_json j;
  j["file"] = e.file;
  j["device"] = e.device;
  auto by_tp = [](const std::map<int32_t, ErrorStats>& stats) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [tp, s] : stats) j[std::to_string(tp)] = StatsJson(s);
    return j;
  };
  auto by_op = [](const std::map<std::string, ErrorStats>& stats) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [op, s] : stats) j[op] = StatsJson(s);
    return j;
  };
  j["mape_total"] = e.total.mape;
  j["total"] = StatsJson(e.total);
  j["total_by_tp"] = by_tp(e.total_by_tp);
  // The form alone, and each GEMM row corrected from its shape's other rows.
  j["gemm_corrected"] = e.corrected;
  j["gemm_shapes"] = e.gemm_shapes;
  j["gemm_shapes_corrected"] = e.corrected_gemm_shapes;
  j["mape_total_form"] = e.total_form.mape;
  j["total_form"] = StatsJson(e.total_form);
  j["total_form_by_tp"] = by_tp(e.total_form_by_tp);
  j["mape_total_leave_one_out"] = e.total_leave_one_out.mape;
  j["total_leave_one_out"] = StatsJson(e.total_leave_one_out);
  j["total_leave_one_out_by_tp"] = by_tp(e.total_leave_one_out_by_tp);
  if (e.step.points > 0) j["step"] = StatsJson(e.step);
  j["ops"] = by_op(e.ops);
  j["ops_form"] = by_op(e.ops_form);
  j["ops_leave_one_out"] = by_op(e.ops_leave_one_out);
  j["not_modelled"] = e.not_modelled;
  return j;
}

std::string PointsCsv(const std::vector<Evaluation>& evaluations, const std::string& kind) {
  std::ostringstream csv;
  CsvWriter w(&csv);
  auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  for (const Evaluation& e : evaluations) {
    for (const PointPrediction& p : e.points) {
      w.Str(kind).Str(e.file).Str(p.op).Int(p.tokens).Int(p.batch).Int(p.context).Int(p.tp);
      w.Str(number(p.measured_ms)).Str(number(p.predicted_ms)).Str(number(p.form_ms));
      w.Str(number(p.leave_one_out_ms)).EndRow();
    }
  }
  return csv.str();
}

// "4.38% (bias -1.08%, worst 19.5%) | by TP: 1: 4.59% 2: 4.94%" (by TP with two or more).
std::string Figures(const ErrorStats& total, const std::map<int32_t, ErrorStats>& by_tp) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f%% (bias %+.2f%%, worst %.1f%%)", total.mape, total.bias,
                total.max_error);
  std::string text = buf;
  if (by_tp.size() < 2) return text;
  text += " | by TP:";
  for (const auto& [tp, stats] : by_tp) {
    std::snprintf(buf, sizeof buf, " %d: %.2f%%", tp, stats.mape);
    text += buf;
  }
  return text;
}

// One file's per-layer figures: as the model predicts (with its GEMM corrections where
// they apply; in sample, each row's correction from its shape's other rows), the form
// alone, and whole steps.
void PrintEvaluation(const char* kind, const Evaluation& e, bool in_sample) {
  const bool loo = in_sample && e.corrected;
  std::printf("%-10s %s: per-layer MAPE %s%s\n", kind, e.file.c_str(),
              loo ? Figures(e.total_leave_one_out, e.total_leave_one_out_by_tp).c_str()
                  : Figures(e.total, e.total_by_tp).c_str(),
              e.not_modelled.empty() ? "" : " (some ops not modelled)");
  if (e.corrected) {
    if (loo) {
      std::printf("%-10s   with GEMM corrections at %lld of its %lld GEMM shapes, each GEMM "
                  "row's from its shape's other rows (leave-one-out; %.2f%% with its own)\n",
                  "", static_cast<long long>(e.corrected_gemm_shapes),
                  static_cast<long long>(e.gemm_shapes), e.total.mape);
    } else {
      std::printf("%-10s   with GEMM corrections at %lld of its %lld GEMM shapes (those the fit "
                  "measured)\n", "", static_cast<long long>(e.corrected_gemm_shapes),
                  static_cast<long long>(e.gemm_shapes));
    }
    std::printf("%-10s   the fitted form alone: %s\n", "",
                Figures(e.total_form, e.total_form_by_tp).c_str());
  }
  if (e.step.points > 0) {
    std::printf("%-10s   whole steps: MAPE %.2f%% (bias %+.2f%%)\n", "", e.step.mape, e.step.bias);
  }
}

// GEMMs fitted on fewer than three weight matrices (OpFit::weight_sizes), named.
std::string FewWeightSizes(const CalibratedModel& model) {
  std::string names;
  for (const auto& [op, f] : model.ops) {
    if (f.weight_sizes > 0 && f.weight_sizes < 3) {
      names += (names.empty() ? "" : ", ") + std::string(InfoOf(op).name) + " (" +
               std::to_string(f.weight_sizes) + ")";
    }
  }
  return names;
}

void PrintFit(const CalibratedModel& model, const Evaluation& in_sample) {
  // MAPE and bias of the form alone; corrected: a GEMM's with its corrections,
  // leave-one-out ("-": none at its shapes).
  std::printf("%-20s %-9s %7s %9s %8s %8s %9s %8s %10s\n", "op", "form", "points", "fixed_us",
              "mem_eff", "comp_eff", "MAPE_%", "bias_%", "corrected");
  auto stats_of = [](const std::map<std::string, ErrorStats>& by_op, const std::string& name) {
    const auto it = by_op.find(name);
    return it == by_op.end() ? ErrorStats{} : it->second;
  };
  for (const auto& [op, f] : model.ops) {
    const std::string name(InfoOf(op).name);
    const ErrorStats s = stats_of(in_sample.ops_form, name);
    const ErrorStats loo = stats_of(in_sample.ops_leave_one_out, name);
    char corrected[16] = "-";
    if (loo.mape != s.mape) std::snprintf(corrected, sizeof corrected, "%.2f", loo.mape);
    char comp[16] = "-";
    if (InfoOf(op).form == OpForm::kRoofline) {
      std::snprintf(comp, sizeof comp, "%.3f%s", f.compute_efficiency, f.compute_fitted ? "" : "*");
    }
    const std::string form(f.FormName());
    std::printf("%-20s %-9s %7lld %9.2f %7.3f%s %8s %9.2f %+8.2f %10s\n", name.c_str(),
                form.c_str(), static_cast<long long>(f.points), f.fixed_us, f.memory_efficiency,
                f.memory_fitted ? " " : "*", comp, s.mape, s.bias, corrected);
    if (f.split_kv) {
      char ramp[64] = "";
      if (f.pair_ramp_tokens > 0) {
        std::snprintf(ramp, sizeof ramp, " (its first %lld tokens %.3f)",
                      static_cast<long long>(f.pair_ramp_tokens),
                      f.pair_ramp_memory_efficiency);
      }
      std::printf("  %-18s CTA memory efficiency %.3f alone, %.3f paired%s; wave %.2f us, "
                  "combine %.2f us + %.3f us a split\n", "(split-KV grid)",
                  f.cta_memory_efficiency, f.pair_memory_efficiency, ramp, f.wave_us,
                  f.combine_us, f.combine_per_split_us);
    }
    if (op == Op::kMoeMlp) {
      std::printf("  %-18s %.2f us an expert run; one-row experts' memory efficiency %.3f\n",
                  "(per expert)", f.per_expert_us, f.single_row_expert_memory_efficiency);
    }
    if (f.single_row_fitted) {
      std::printf("  %-18s %-9s %7lld %9.2f %7.3f  %8s\n", "(single row)", "stream",
                  static_cast<long long>(f.single_row_points), f.single_row_fixed_us,
                  f.single_row_memory_efficiency, "-");
    }
  }
}

}  // namespace

nlohmann::ordered_json CalibrationJson(const std::string& model_path, const CalibratedModel& model,
                                       const Evaluation& in_sample, const std::vector<Evaluation>& fitted,
                                       const std::vector<Evaluation>& evaluations) {
  nlohmann::ordered_json json;
  json["model"] = model_path;
  json["device"] = model.device;
  json["fitted_from"] = model.fitted_from;
  // An efficiency is a number, or "inf" (MODEL.yaml's .inf) for a term the fit dropped
  // (it costs nothing): JSON has no infinity, and nlohmann would write null.
  auto efficiency = [](double v) -> nlohmann::ordered_json {
    if (std::isinf(v)) return "inf";
    return v;
  };
  nlohmann::ordered_json ops = nlohmann::ordered_json::object();
  for (const auto& [op, f] : model.ops) {
    nlohmann::ordered_json o;
    o["form"] = f.FormName();
    o["points"] = f.points;
    o["fixed_us"] = f.fixed_us;
    o["memory_efficiency"] = efficiency(f.memory_efficiency);
    o["memory_fitted"] = f.memory_fitted;
    if (f.weight_sizes > 0) o["weight_sizes"] = f.weight_sizes;
    if (InfoOf(op).form == OpForm::kRoofline) {
      o["compute_efficiency"] = efficiency(f.compute_efficiency);
      o["compute_fitted"] = f.compute_fitted;
    }
    if (f.split_kv) {
      o["cta_memory_efficiency"] = efficiency(f.cta_memory_efficiency);
      o["pair_memory_efficiency"] = efficiency(f.pair_memory_efficiency);
      o["wave_us"] = f.wave_us;
      o["combine_us"] = f.combine_us;
      o["combine_per_split_us"] = f.combine_per_split_us;
      o["pair_ramp_tokens"] = f.pair_ramp_tokens;
      if (f.pair_ramp_tokens > 0) o["pair_ramp_memory_efficiency"] = efficiency(f.pair_ramp_memory_efficiency);
    }
    if (op == Op::kMoeMlp) {
      o["per_expert_us"] = f.per_expert_us;
      o["single_row_expert_memory_efficiency"] = efficiency(f.single_row_expert_memory_efficiency);
    }
    ops[std::string(InfoOf(op).name)] = o;
  }
  json["ops"] = ops;
  if (!model.routing.empty()) {
    nlohmann::ordered_json routing = nlohmann::ordered_json::array();
    for (const CountedRouting& r : model.routing) {
      routing.push_back({{"num_experts", r.num_experts},
                         {"experts_per_token", r.experts_per_token},
                         {"hidden_size", r.hidden_size},
                         {"expert_intermediate_size", r.expert_intermediate_size},
                         {"decode_rows", r.decode_rows},
                         {"decode_ratio", r.decode_ratio},
                         {"routing_skew", r.routing_skew},
                         {"skew_given", r.skew_given},
                         {"chunk_rows", r.chunk_rows},
                         {"chunk_ratio", r.chunk_ratio},
                         {"routing_locality", r.routing_locality},
                         {"routing_favourites", r.routing_favourites},
                         {"touched_mape_pct", r.touched_mape_pct},
                         {"uniform_touched_mape_pct", r.uniform_touched_mape_pct}});
    }
    json["routing"] = routing;
  }
  if (const auto& a = model.after_prefill) {
    json["after_prefill"] = {{"batches", a->batches},   {"slowdown", a->slowdown},
                             {"decay_steps", a->decay_steps}, {"rows", a->rows},
                             {"prefill_tokens_min", a->prefill_tokens_min},
                             {"prefill_tokens_max", a->prefill_tokens_max},
                             {"mape_pct", a->mape_pct}, {"bias_pct", a->bias_pct}};
  }
  json["in_sample"] = EvaluationJson(in_sample);
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const Evaluation& e : fitted) files.push_back(EvaluationJson(e));
  json["files"] = files;
  nlohmann::ordered_json evals = nlohmann::ordered_json::array();
  for (const Evaluation& e : evaluations) evals.push_back(EvaluationJson(e));
  json["evaluations"] = evals;
  return json;
}

std::string CalibrationPointsCsv(const std::vector<Evaluation>& fitted,
                                 const std::vector<Evaluation>& evaluations) {
  return "kind,file,op,tokens,batch,context,tp,measured_ms,predicted_ms,form_ms,leave_one_out_ms\n" +
         PointsCsv(fitted, "fit") + PointsCsv(evaluations, "evaluate");
}

void PrintCalibration(const CalibratedModel& model, const Evaluation& in_sample,
                      const std::vector<Evaluation>& fitted, const std::vector<Evaluation>& evaluations) {
  PrintFit(model, in_sample);
  if (const std::string few = FewWeightSizes(model); !few.empty()) {
    std::printf("note: GEMMs fitted on fewer than 3 weight sizes: %s; their fixed cost and "
                "weight reads are barely told apart and may not carry to another shape: "
                "profile another model shape or TP degree\n", few.c_str());
  }
  for (const CountedRouting& r : model.routing) {
    std::printf("routing (%d experts, %d a token): the engine ran %.2fx the experts uniform "
                "routing expects in prefill chunks (%lld rows) and %.2fx in decode batches "
                "(%lld); moe_mlp is fitted on what it ran. For the simulator: routing_skew %s "
                "(%s), routing_locality %s over routing_favourites %s (chunks), in "
                "MODEL.yaml: experts per "
                "row within %.1f%% of the counts (uniform routing: %.1f%%)\n",
                r.num_experts, r.experts_per_token, r.chunk_ratio,
                static_cast<long long>(r.chunk_rows), r.decode_ratio,
                static_cast<long long>(r.decode_rows), FormatDouble(r.routing_skew).c_str(),
                r.skew_given ? "given, --routing-skew" : "decode batches",
                FormatDouble(r.routing_locality).c_str(),
                FormatDouble(r.routing_favourites).c_str(), r.touched_mape_pct,
                r.uniform_touched_mape_pct);
  }
  for (const Evaluation& e : fitted) PrintEvaluation("in sample", e, true);
  for (const Evaluation& e : evaluations) PrintEvaluation("evaluate", e, false);
  if (model.has_step_overhead) {
    std::printf("step overhead (whole steps beyond their ops, median): %.2f us\n",
                model.step_overhead_us);
  }
  if (model.has_decode_step_overhead) {
    std::printf("decode step overhead (decode steps beyond their ops, median; replayed as CUDA "
                "graphs): %.2f us\n", model.decode_step_overhead_us);
  }
  if (const auto& a = model.after_prefill) {
    std::printf("decodes after a prefill step (%lld rows, chunks of %d-%d tokens): the first slower than settled "
                "by %s; the fit %.2f%% MAPE, bias %+.2f%%\n",
                static_cast<long long>(a->rows), a->prefill_tokens_min, a->prefill_tokens_max, a->Said().c_str(),
                a->mape_pct, a->bias_pct);
  }
}

}  // namespace servelab
