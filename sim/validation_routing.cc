#include "sim/validation_routing.h"

#include <map>

namespace servelab {

std::vector<RoutingRow> RoutingRows(std::span<const StepComparison> steps) {
  std::map<int64_t, RoutingRow> decode;  // by the range's top, a power of two
  RoutingRow mixed{"mixed", 0, {}, {}};
  for (const StepComparison& step : steps) {
    if (!step.experts_measured || !step.experts_predicted) continue;
    RoutingRow* row = &mixed;
    if (step.decode_only) {
      const StepRange range = StepRangeOf(step);
      row = &decode[range.top];
      row->steps = range.name;
    }
    ++row->count;
    row->engine.run += step.experts_measured->run;
    row->engine.single_row += step.experts_measured->single_row;
    row->sim.run += step.experts_predicted->run;
    row->sim.single_row += step.experts_predicted->single_row;
  }
  std::vector<RoutingRow> rows;
  for (auto& [top, row] : decode) rows.push_back(row);
  if (mixed.count > 0) rows.push_back(mixed);
  for (RoutingRow& row : rows) {
    const double n = static_cast<double>(row.count);
    row.engine = ExpertsRun{row.engine.run / n, row.engine.single_row / n};
    row.sim = ExpertsRun{row.sim.run / n, row.sim.single_row / n};
  }
  return rows;
}

std::optional<RoutingFit> FitRouting(const LoadValidation& v) {
  const ModelSpec& model = v.sim_config.model;
  if (!model.IsMoe()) return std::nullopt;
  std::vector<RoutingCount> decodes, decodes_expected, chunks, chunks_expected;
  for (const StepComparison& step : v.steps) {
    if (!step.experts_measured || !step.experts_predicted) continue;
    if (step.decode_only && step.seqs >= 2) {
      decodes.push_back(RoutingCount{step.seqs, 1, step.experts_measured->run});
      decodes_expected.push_back(RoutingCount{step.seqs, 1, step.experts_predicted->run});
    } else if (!step.decode_only && step.seqs == 1 && step.tokens > 1) {
      chunks.push_back(RoutingCount{1, step.tokens, step.experts_measured->run});
      chunks_expected.push_back(RoutingCount{1, step.tokens, step.experts_predicted->run});
    }
  }
  if (decodes.empty() && chunks.empty()) return std::nullopt;
  const int32_t e = model.num_experts, k = model.num_experts_per_tok;
  RoutingFit fit;
  fit.decode_steps = static_cast<int64_t>(decodes.size());
  if (!decodes.empty()) {
    fit.skew_engine = FitRoutingSkew(e, k, decodes);
    fit.skew_sim = FitRoutingSkew(e, k, decodes_expected);
  }
  fit.chunk_steps = static_cast<int64_t>(chunks.size());
  if (!chunks.empty()) {
    fit.locality_engine = FitRoutingLocality(e, k, fit.skew_engine, chunks);
    fit.locality_sim = FitRoutingLocality(e, k, fit.skew_sim, chunks_expected);
  }
  return fit;
}

}  // namespace servelab
