#include "cli/validate_report.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/text.h"
#include "driver/output_dir.h"

namespace servelab {

std::string StepsCsv(const LoadValidation& v) {
  // graph_measured only from an engine that says how it ran each step (not a playback of a
  // recording without it: its empty cells would read as steps run op by op).
  const bool reported = std::all_of(v.steps.begin(), v.steps.end(),
                                    [](const StepComparison& s) { return s.graphs_reported; });
  std::string csv = std::string("tokens,seqs,context_tokens,decode_only,measured_ms,predicted_ms,experts_measured,"
                                "experts_predicted,") +
                    (reported ? "graph_measured," : "") + "graph_predicted\n";
  for (const StepComparison& s : v.steps) {
    // %.6f of a double is at most 317 bytes (DBL_MAX): the row fits whatever its times.
    char row[1024];
    std::snprintf(row, sizeof row, "%d,%d,%lld,%d,%.6f,%.6f,", s.tokens, s.seqs,
                  static_cast<long long>(s.context_tokens), s.decode_only ? 1 : 0, s.measured_s * 1e3,
                  s.predicted_s * 1e3);
    csv += row;
    if (s.experts_measured && s.experts_predicted) {
      std::snprintf(row, sizeof row, "%.4f,%.4f", s.experts_measured->run, s.experts_predicted->run);
      csv += row;
    } else {
      csv += ',';
    }
    const auto graph = [&csv](const std::optional<DecodeGraphRun>& g) {
      csv += ',';
      if (g) csv += std::to_string(g->rows) + "x" + std::to_string(g->context_bucket);
    };
    if (reported) graph(s.graph_measured);
    graph(s.graph_predicted);
    csv += '\n';
  }
  return csv;
}

Status WriteStepsCompared(const std::string& dir, const LoadValidation& v) {
  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return folder.status();
  SERVELAB_RETURN_IF_ERROR((*folder)->WriteFile("steps_compared.csv", StepsCsv(v)));
  return (*folder)->Commit();
}

void PrintLoad(const LoadValidation& v) {
  std::printf("%s: %lld steps, step-time MAPE %.2f%% (bias %+.2f%%); TTFT p50 %+.2f%%, "
              "E2E p50 %+.2f%%, p99 %+.2f%%", Printable(v.label).c_str(),
              static_cast<long long>(v.step_error.points), v.step_error.mape, v.step_error.bias,
              v.ErrorPct("ttft", "p50"), v.ErrorPct("e2e", "p50"), v.ErrorPct("e2e", "p99"));
  if (!v.host.steps.empty()) std::printf("; host drift %+.2f%%", v.host.DriftPct());
  if (v.attempts > 1) std::printf(" (run %d)", v.attempts);
  if (v.replay) {
    std::printf("; replayed on the engine's step times: %s (largest error %+.2f%%)",
                v.replay->Account().c_str(), v.replay->LargestErrorPct());
  }
  if (const ErrorWander& w = v.decode_wander; w.windows > 1) {
    std::printf("; decode error by stretch %+.1f%% to %+.1f%%", w.window_min_pct, w.window_max_pct);
  }
  for (const MetricComparison& m : v.run_to_run) {
    if (m.metric == "e2e" && m.statistic == "p50") {
      std::printf("; the engine's E2E p50 %+.2f%% from its first run", m.error_pct);
    }
  }
  std::printf("\n");
}

}  // namespace servelab
