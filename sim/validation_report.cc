#include "sim/validation_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <optional>
#include <utility>

#include "sim/validation_routing.h"

namespace servelab {

namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f", v);
  return buf;
}

// Each load's runs in order: the first, then its reruns.
std::vector<const LoadValidation*> EveryRun(const std::vector<LoadValidation>& loads) {
  std::vector<const LoadValidation*> runs;
  for (const LoadValidation& v : loads) {
    runs.push_back(&v);
    for (const LoadValidation& again : v.reruns) runs.push_back(&again);
  }
  return runs;
}

// The latency figures a validation is judged on (ours, after BLIS's): TTFT, TPOT and E2E
// at p50 and p99.
bool TargetFigure(const MetricComparison& m) {
  return (m.metric == "ttft" || m.metric == "tpot" || m.metric == "e2e") &&
         (m.statistic == "p50" || m.statistic == "p99");
}

// (heading, figures) per column of a table of end-to-end figures.
using MetricColumns = std::vector<std::pair<std::string, std::vector<MetricComparison>>>;

// A markdown table of end-to-end figures' error_pct: a row per figure (the first column's
// order, CompareRuns'), a column per (heading, figures).
std::string MetricTable(const MetricColumns& columns) {
  std::string md = "| metric |";
  for (const auto& [heading, figures] : columns) md += " " + heading + " |";
  md += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) md += "---|";
  md += "\n";
  if (columns.empty()) return md;
  const std::vector<MetricComparison>& rows = columns.front().second;
  for (size_t m = 0; m < rows.size(); ++m) {
    md += "| ";
    md += rows[m].metric;
    if (rows[m].statistic != "value") {
      md += ' ';
      md += rows[m].statistic;
    }
    md += " |";
    for (const auto& [heading, figures] : columns) {
      md += ' ';
      md += Pct(figures[m].error_pct);
      md += " |";
    }
    md += "\n";
  }
  return md;
}

// validation.md's section on the engine's reruns (empty without any): each rerun's
// figures against the first run's, and on the figures validations are judged on, how
// often the simulator's error on the first run is within the engine's own largest change.
std::string RunToRunMarkdown(const std::vector<LoadValidation>& loads) {
  std::vector<const LoadValidation*> reruns;
  for (const LoadValidation& v : loads) {
    for (const LoadValidation& again : v.reruns) reruns.push_back(&again);
  }
  if (reruns.empty()) return "";
  MetricColumns changes;
  for (const LoadValidation* v : reruns) changes.emplace_back(v->label, v->run_to_run);
  std::string md =
      "\nRun to run: the engine again on the same requests, right after the first run (no "
      "host check), its figures against the first run's, % ((again - first) / first). The "
      "engine's own change bounds how closely any simulator can be shown to match it.\n\n" +
      MetricTable(changes);
  // Per load and figure: the simulator's error on the first run against the largest
  // change of the engine's reruns.
  int32_t figures = 0, within = 0;
  for (const LoadValidation& v : loads) {
    if (v.reruns.empty()) continue;
    for (size_t m = 0; m < v.metrics.size(); ++m) {
      if (!TargetFigure(v.metrics[m])) continue;
      double largest = 0;
      for (const LoadValidation& again : v.reruns) {
        largest = std::max(largest, std::abs(again.run_to_run[m].error_pct));
      }
      ++figures;
      if (std::abs(v.metrics[m].error_pct) <= largest) ++within;
    }
  }
  md += "\nOf TTFT, TPOT and E2E at p50 and p99 over the loads run again, the simulator's "
        "error on the first run is within the engine's largest change between its runs on " +
        std::to_string(within) + " of " + std::to_string(figures) + ".\n";

  MetricColumns means;
  for (const LoadValidation& v : loads) {
    if (v.reruns.empty()) continue;
    means.emplace_back(v.label + " (" + std::to_string(1 + v.reruns.size()) + " runs)",
                       v.AgainstEngineMean());
  }
  md += "\nThe simulated run against the mean of the engine's runs at each load, error %:\n\n" +
        MetricTable(means);
  return md;
}

// validation.md's section on CUDA graphs (empty when no step of any run ran or was priced
// as one): per run, the engine's graph steps against the graph the simulator priced each
// as, and the first step where they differ.
std::string GraphsMarkdown(const std::vector<const LoadValidation*>& runs) {
  std::string rows, differences, unsaid;
  for (const LoadValidation* run : runs) {
    const GraphAgreement a = GraphAgreementOf(run->steps);
    if (a.unreported > 0) {
      unsaid += "\nThe engine of " + run->label + " does not say how it ran its steps (a recording without "
                "graph_measured): " + std::to_string(a.unreported) +
                " steps the simulator priced as CUDA graphs are not compared.\n";
    }
    if (a.padded > 0) {
      differences += "- " + run->label + ": " + std::to_string(a.padded) +
                     " steps with static batching's padding left out (the engine computes nothing for it, "
                     "the simulator prices it)\n";
    }
    if (!a.Any()) continue;
    char cells[192];
    std::snprintf(cells, sizeof cells, " | %lld | %lld | %lld | %lld | %lld |\n", static_cast<long long>(a.engine_graphs),
                  static_cast<long long>(a.same), static_cast<long long>(a.other_graph),
                  static_cast<long long>(a.priced_eager), static_cast<long long>(a.sim_only));
    rows += "| " + run->label + cells;
    if (!a.first_difference.empty()) differences += "- " + run->label + ": " + a.first_difference + "\n";
  }
  if (rows.empty()) return unsaid;
  return "\nCUDA graphs: the steps the engine replayed as a decode graph, against the graph the simulator "
         "priced each as (its rows and context bucket: kernels/decode_graph_shape.h under the deployment's "
         "max_num_seqs and context served), and the steps it priced as a graph that the engine ran op by op.\n\n"
         "| load | engine's graphs | priced as the same graph | as another graph | as run op by op | "
         "a graph the engine did not run |\n|---|---|---|---|---|---|\n" +
         rows + (differences.empty() ? "" : "\nWhere they differ (the first step), and what was left out:\n\n" + differences) +
         unsaid;
}

// validation.md's section on a mixture of experts' routing (empty without counts): per run
// and kind of step, the experts counted against the simulator's expectation, then the
// routing skew each run's decode batches fit.
std::string RoutingMarkdown(const std::vector<const LoadValidation*>& runs) {
  std::string routing;
  // A percentage to one decimal, a rounding's -0.0 as +0.0.
  auto tenth = [](double pct) { return std::abs(pct) < 0.05 ? 0.0 : pct; };
  for (const LoadValidation* run : runs) {
    for (const RoutingRow& row : RoutingRows(run->steps)) {
      char cells[192];
      std::snprintf(cells, sizeof cells, " | %lld | %.2f | %.2f | %+.1f | %.2f | %.2f | %+.1f |\n",
                    static_cast<long long>(row.count), row.engine.run, row.sim.run,
                    tenth(100.0 * RelativeChange(row.engine.run, row.sim.run)), row.engine.single_row,
                    row.sim.single_row, tenth(100.0 * RelativeChange(row.engine.single_row, row.sim.single_row)));
      routing += "| " + run->label + " | " + row.steps + cells;
    }
  }
  if (routing.empty()) return "";
  std::string md =
      "\nMixture of experts: the experts a MoE layer ran in each step (the mean over its layers) "
      "as the engine counted them, against the simulator's routing model, by kind of step "
      "(decode_B: decode-only steps of B sequences; mixed: steps with a prefill chunk), and of "
      "them those given one row; each the mean over the steps, error % of the simulator's.\n\n"
      "| load | steps | count | experts run | expected | error % | one-row experts | expected | "
      "error % |\n|---|---|---|---|---|---|---|---|---|\n" + routing;
  std::string fits;
  for (const LoadValidation* run : runs) {
    if (const std::optional<RoutingFit> fit = FitRouting(*run)) {
      char cells[240];
      std::snprintf(cells, sizeof cells, " | %lld | %.2f | %.2f | %lld | %.3f, %.1f | %.3f, %.1f |\n",
                    static_cast<long long>(fit->decode_steps), fit->skew_engine, fit->skew_sim,
                    static_cast<long long>(fit->chunk_steps), fit->locality_engine.locality,
                    fit->locality_engine.favourites, fit->locality_sim.locality,
                    fit->locality_sim.favourites);
      fits += "| " + run->label + cells;
    }
  }
  if (fits.empty()) return md;
  return md +
         "\nThe routing that fits the counts, on the engine's and on the simulator's expectations: "
         "the skew (cost_model.routing_skew: a Zipf exponent over the experts, 0 = uniform) of "
         "the decode-only steps of two or more sequences, then, at that skew, the locality and "
         "favourites of the lone prefill chunks (one sequence, more than one token; 0 and 1 "
         "where there are none): cost_model.routing_locality, the chance a chunk's token "
         "routes as one of its sequence's cost_model.routing_favourites shared draws rather "
         "than on its own (0 = independently; 1 over one favourite = the chunk as one token). "
         "The engine's are the ones to route with to route as this run did (--set "
         "cost_model.routing_skew=S --set cost_model.routing_locality=L --set "
         "cost_model.routing_favourites=F).\n\n| load | decode steps | skew, engine | skew, "
         "simulator | lone chunks | locality, favourites: engine | locality, favourites: "
         "simulator |\n|---|---|---|---|---|---|---|\n" + fits;
}

// validation.md's section on the replays (empty without any).
std::string ReplayMarkdown(const std::vector<LoadValidation>& loads) {
  std::string rows;
  for (const LoadValidation& v : loads) {
    if (!v.replay) continue;
    const StepReplay& r = *v.replay;
    rows += "| " + v.label + " | " + std::to_string(r.steps) + " | " + std::to_string(r.replayed) + " | " +
            std::to_string(r.matched) + " | " + Pct(r.LargestErrorPct()) + " | " + r.Account() + " |\n";
  }
  if (rows.empty()) return "";
  return "\nReplay: the simulated run again, each step taking the time the engine measured for "
         "the same step, everything else the simulator's. While the two schedules are one, the "
         "replay's figures are the engine's to the nanosecond and the end-to-end errors above are "
         "wholly the cost model's step times. Steps of the same work starting at other times are "
         "the engine's time between steps (a wall clock's); where the schedules part, the rest "
         "runs on the simulator's own times (it samples no stop tokens; the policies' "
         "predictions are its own).\n\n| load | engine steps | replay steps | "
         "replayed as the engine's | largest end-to-end error % | schedules |\n"
         "|---|---|---|---|---|---|\n" + rows;
}

// validation.csv's rows of end-to-end figures, under `label`.
void MetricRows(std::string& csv, const std::string& label, const std::vector<MetricComparison>& metrics) {
  for (const MetricComparison& m : metrics) {
    csv += label + "," + m.metric + "," + m.statistic + "," + Number(m.engine) + "," +
           Number(m.sim) + "," + Number(m.error_pct) + "\n";
  }
}

// A step-time error by kind of step (`ranges`: StepErrorsByRange or
// DecodeErrorsAfterPrefill, ranges by top, the one of top 0 last), a column a run, after
// `heading`.
std::string RangesMarkdown(const std::vector<const LoadValidation*>& runs,
                           std::vector<StepRangeError> (*ranges)(std::span<const StepComparison>),
                           const std::string& heading) {
  std::map<std::pair<bool, int64_t>, std::string> kinds;  // ranges by top, then top 0
  std::vector<std::vector<StepRangeError>> by_run;
  for (const LoadValidation* v : runs) {
    by_run.push_back(ranges(v->steps));
    for (const StepRangeError& r : by_run.back()) kinds[{r.top == 0, r.top}] = r.steps;
  }
  if (kinds.empty()) return "";
  std::string md = heading + "\n\n| steps |";
  for (const LoadValidation* v : runs) md += " " + v->label + " |";
  md += "\n|---|";
  for (size_t i = 0; i < runs.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& kind : kinds) {
    const std::string& name = kind.second;  // a lambda below captures it: not a structured binding
    md += "| " + name + " |";
    for (const std::vector<StepRangeError>& errors : by_run) {
      const auto it = std::find_if(errors.begin(), errors.end(),
                                   [&name](const StepRangeError& r) { return r.steps == name; });
      if (it == errors.end()) {
        md += " |";
        continue;
      }
      char cell[96];
      std::snprintf(cell, sizeof cell, " %.1f / %+.1f (%lld) |", it->error.mape, it->error.bias,
                    static_cast<long long>(it->error.points));
      md += cell;
    }
    md += "\n";
  }
  return md;
}

}  // namespace

std::string ValidationCsv(const std::vector<LoadValidation>& loads) {
  std::string csv = "load,quantity,statistic,engine,sim,error_pct\n";
  auto rows = [&csv](const LoadValidation& v) {
    struct Kind {
      const char* name;
      StepKind steps;
      const ErrorStats* stats;
    };
    const Kind kinds[] = {{"all", StepKind::kAll, &v.step_error},
                          {"decode", StepKind::kDecodeOnly, &v.decode_step_error},
                          {"mixed", StepKind::kMixed, &v.mixed_step_error}};
    for (const auto& [kind, which, stats] : kinds) {
      if (stats->points == 0) continue;
      // engine and sim: these steps' mean measured and predicted times.
      const std::string e = Number(v.MeanStepS(which, false));
      const std::string s = Number(v.MeanStepS(which, true));
      const std::string q = std::string("step_time_") + kind;
      csv += v.label + "," + q + ",mape," + e + "," + s + "," + Number(stats->mape) + "\n";
      csv += v.label + "," + q + ",bias," + e + "," + s + "," + Number(stats->bias) + "\n";
      csv += v.label + "," + q + ",max," + e + "," + s + "," + Number(stats->max_error) + "\n";
      csv += v.label + "," + q + ",time," + e + "," + s + "," + Number(v.TimeErrorPct(which)) + "\n";
    }
    // Each range of decode batches (the mixed steps are step_time_mixed, above).
    for (const StepRangeError& r : StepErrorsByRange(v.steps)) {
      if (r.top == 0) continue;
      const std::string at = v.label + ",step_time_" + r.steps + ",";
      const std::string times = Number(r.measured_s) + "," + Number(r.predicted_s) + ",";
      csv += at + "mape," + times + Number(r.error.mape) + "\n";
      csv += at + "bias," + times + Number(r.error.bias) + "\n";
    }
    // The decode-only steps by their place after the last prefill step.
    for (const StepRangeError& r : DecodeErrorsAfterPrefill(v.steps)) {
      const std::string at = v.label + ",step_time_decode_after_prefill_" + r.steps + ",";
      const std::string times = Number(r.measured_s) + "," + Number(r.predicted_s) + ",";
      csv += at + "mape," + times + Number(r.error.mape) + "\n";
      csv += at + "bias," + times + Number(r.error.bias) + "\n";
    }
    if (const ErrorWander& w = v.decode_wander; w.windows > 0) {
      const std::string e = Number(v.MeanStepS(StepKind::kDecodeOnly, false));
      const std::string s = Number(v.MeanStepS(StepKind::kDecodeOnly, true));
      const std::string at = v.label + ",step_time_decode,";
      csv += at + "autocorrelation," + e + "," + s + "," + Number(w.autocorrelation) + "\n";
      csv += at + "window_min," + e + "," + s + "," + Number(w.window_min_pct) + "\n";
      csv += at + "window_max," + e + "," + s + "," + Number(w.window_max_pct) + "\n";
    }
    if (const std::optional<RoutingFit> fit = FitRouting(v)) {
      if (fit->decode_steps > 0) {
        csv += v.label + ",routing_skew,decode," + Number(fit->skew_engine) + "," + Number(fit->skew_sim) +
               "," + Number(fit->skew_sim - fit->skew_engine) + "\n";
      }
      if (fit->chunk_steps > 0) {
        const RoutingLocality& by_engine = fit->locality_engine;
        const RoutingLocality& by_sim = fit->locality_sim;
        csv += v.label + ",routing_locality,chunk," + Number(by_engine.locality) + "," +
               Number(by_sim.locality) + "," + Number(by_sim.locality - by_engine.locality) + "\n";
        csv += v.label + ",routing_favourites,chunk," + Number(by_engine.favourites) + "," +
               Number(by_sim.favourites) + "," + Number(by_sim.favourites - by_engine.favourites) +
               "\n";
      }
    }
    if (const GraphAgreement g = GraphAgreementOf(v.steps); g.Any()) {
      // engine: the steps it replayed as graphs; sim: of them (or, for graph_not_run, of the
      // steps it ran op by op) those priced so; error_pct empty: counts, not errors.
      const std::pair<const char*, int64_t> counts[] = {{"same_graph", g.same},
                                                        {"other_graph", g.other_graph},
                                                        {"priced_op_by_op", g.priced_eager},
                                                        {"graph_not_run", g.sim_only}};
      for (const auto& [statistic, count] : counts) {
        csv += v.label + ",decode_graphs," + statistic + "," + std::to_string(g.engine_graphs) + "," +
               std::to_string(count) + ",\n";
      }
    }
    for (const RoutingRow& row : RoutingRows(v.steps)) {
      csv += v.label + ",routing_experts," + row.steps + "," + Number(row.engine.run) + "," +
             Number(row.sim.run) + "," + Number(100.0 * RelativeChange(row.engine.run, row.sim.run)) + "\n";
      csv += v.label + ",routing_single_row," + row.steps + "," + Number(row.engine.single_row) + "," +
             Number(row.sim.single_row) + "," + Number(100.0 * RelativeChange(row.engine.single_row, row.sim.single_row)) +
             "\n";
    }
    for (const bool after : {false, true}) {
      for (const ReferenceStep& r : v.host.steps) {
        const double measured = after ? r.after_s : r.before_s;
        csv += v.label + ",reference_step," + (after ? "after:" : "before:") + r.Label() + "," +
               Number(measured) + "," + Number(r.predicted_s) + "," +
               Number(100.0 * RelativeChange(measured, r.predicted_s)) + "\n";
      }
    }
    MetricRows(csv, v.label, v.metrics);
  };
  for (const LoadValidation& v : loads) {
    rows(v);
    // The runs of the load, the kept one the last (engine: their count).
    csv += v.label + ",attempts,runs," + std::to_string(v.attempts) + ",,\n";
    if (v.replay) {
      const StepReplay& r = *v.replay;
      const std::string at = v.label + "/replay,schedule,";
      const std::string steps = std::to_string(r.steps);
      auto pct = [&r](int64_t n) {
        return r.steps > 0 ? 100.0 * static_cast<double>(n - r.steps) / static_cast<double>(r.steps) : 0.0;
      };
      csv += at + "steps," + steps + "," + std::to_string(r.replayed) + "," + Number(pct(r.replayed)) + "\n";
      csv += at + "matched," + steps + "," + std::to_string(r.matched) + "," + Number(pct(r.matched)) + "\n";
      csv += at + "shifted," + std::to_string(r.matched) + "," + std::to_string(r.shifted) + "," +
             Number(r.matched > 0 ? 100.0 * static_cast<double>(r.shifted) / static_cast<double>(r.matched) : 0.0) +
             "\n";
      MetricRows(csv, v.label + "/replay", r.metrics);
    }
    for (const LoadValidation& again : v.reruns) rows(again);
    // The simulated run against the mean of the engine's runs.
    if (!v.reruns.empty()) MetricRows(csv, v.label + "/mean", v.AgainstEngineMean());
  }
  return csv;
}

std::string ValidationMarkdown(const std::string& experiment,
                               const std::vector<LoadValidation>& loads) {
  const std::vector<const LoadValidation*> runs = EveryRun(loads);
  std::string md = "# Validation: " + experiment + "\n\n";
  if (!loads.empty()) md += "Simulator: " + loads.front().sim_cost_model + "\n\n";
  if (!loads.empty() && !loads.front().recorded_from.empty()) {
    md += "Engine: played back from its recording (`servelab validate --recorded`; " +
          loads.front().recorded_from + " and the other loads' folders beside it): its plans "
          "made again on its measured step times, each checked against the recorded step.\n\n";
  }
  md += "Errors are (simulated - measured) / measured. Step time: the simulator's cost of "
        "each step plan the engine executed.\n\n";
  md += "Time error: of the steps' summed time, what the end-to-end figures move with (a step "
        "weighs by its length, where in the MAPE each weighs the same).\n\n";
  md += "| load | engine busy | steps | step MAPE % | step bias % | worst step % | time error % "
        "| decode MAPE % | mixed MAPE % |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const LoadValidation* run : runs) {
    const LoadValidation& v = *run;
    char row[256];  // the numbers; the label (up to a folder name's length) goes before
    std::snprintf(row, sizeof row, " | %.0f%% | %lld | %.2f | %+.2f | %.1f | %+.2f | %.2f | %.2f |\n",
                  100.0 * v.engine.gpu_busy_fraction,
                  static_cast<long long>(v.step_error.points), v.step_error.mape,
                  v.step_error.bias, v.step_error.max_error, v.TimeErrorPct(StepKind::kAll),
                  v.decode_step_error.mape, v.mixed_step_error.mape);
    md += "| " + v.label + row;
  }
  md += RangesMarkdown(
      runs, StepErrorsByRange,
      "\nStep time by kind of step (decode_B: decode-only steps of B sequences, decode_A-B of A "
      "to B; mixed: steps with a prefill chunk), MAPE % / bias % (steps); a model's residual by configuration, or a "
      "host whose memory-bound steps (few sequences: every weight streamed) move while the rest hold:");
  md += RangesMarkdown(
      runs, DecodeErrorsAfterPrefill,
      "\nDecode-only steps by their place after the last step with a prefill chunk (k = 1: the first decode "
      "after it), MAPE % / bias % (steps); a device runs the first few slower than settled ones, which a model "
      "without `after_prefill` prices as settled:");
  std::string again;
  for (const LoadValidation& v : loads) {
    if (v.attempts > 1) again += (again.empty() ? " " : ", ") + v.label + " " + std::to_string(v.attempts);
  }
  if (!again.empty()) {
    md += "\nRun again (`--retries`: its host drifted, or its decode errors wandered, past the "
          "limits), the last run kept, runs:" + again + ".\n";
  }
  bool wander = false;
  for (const LoadValidation* v : runs) wander = wander || v->decode_wander.windows > 0;
  if (wander) {
    md += "\nDecode-only steps' errors in step order: the lag-one autocorrelation of "
          "consecutive ones, and the lowest and highest mean error over stretches of " +
          std::to_string(loads.front().decode_wander.window) +
          " (at a steady load each stretch mixes the same configurations: a model's error "
          "stays put from one to the next, a host changing speed during the run parts "
          "them).\n\n| load | decode steps | "
          "autocorrelation | stretches | lowest % | highest % |\n|---|---|---|---|---|---|\n";
    for (const LoadValidation* run : runs) {
      const LoadValidation& v = *run;
      const ErrorWander& w = v.decode_wander;
      if (w.windows == 0) continue;
      char row[256];
      std::snprintf(row, sizeof row, " | %lld | %.2f | %d | %+.1f | %+.1f |\n",
                    static_cast<long long>(v.decode_step_error.points), w.autocorrelation,
                    w.windows, w.window_min_pct, w.window_max_pct);
      md += "| " + v.label + row;
    }
  }
  md += RoutingMarkdown(runs);
  md += GraphsMarkdown(runs);
  bool checked = false;
  for (const LoadValidation* v : runs) checked = checked || !v->host.steps.empty();
  if (checked) {
    md += "\nHost check: the engine's reference steps (decode-B@C: B sequences at context C; "
          "prefill-T@C: a chunk of T tokens after C), timed as the profile times its rows "
          "right before and after the load's run; drift is their medians' mean relative "
          "change across the run (max: the largest one step's), error the simulator's mean "
          "relative error on them.\n\n| load | reference steps | before ms | "
          "after ms | drift % | max drift % | error before % | error after % |\n"
          "|---|---|---|---|---|---|---|---|\n";
    for (const LoadValidation* run : runs) {
      const LoadValidation& v = *run;
      if (v.host.steps.empty()) continue;
      std::string labels;
      for (const ReferenceStep& r : v.host.steps) {
        if (!labels.empty()) labels += ' ';
        labels += r.Label();
      }
      char row[256];
      std::snprintf(row, sizeof row, " | %.3f | %.3f | %+.2f | %.2f | %+.2f | %+.2f |\n",
                    1e3 * v.host.Before(),
                    1e3 * v.host.After(), v.host.DriftPct(), v.host.MaxDriftPct(),
                    v.host.ErrorPct(false), v.host.ErrorPct(true));
      md += "| " + v.label + " | " + labels + row;
    }
  }
  MetricColumns errors;
  for (const LoadValidation* v : runs) errors.emplace_back(v->label, v->metrics);
  md += "\nEnd to end, error % of the simulated run:\n\n" + MetricTable(errors);
  md += ReplayMarkdown(loads);
  md += RunToRunMarkdown(loads);
  return md;
}

}  // namespace servelab
