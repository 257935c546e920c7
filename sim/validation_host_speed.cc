// ValidateAtHostSpeed (validation.h): the simulated run again at the host's speed around
// the engine's run, as the host check measured it.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>

#include "sim/validation.h"
#include "sim/validation_backends.h"
#include "sim/validation_report.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using validation_internal::RelativeErrors;
using validation_internal::WrappingBackend;

// The simulator's backend with every step's time, its stages' and its prefill
// predictions multiplied by `speed` (a host that much slower than the one fitted).
class HostSpeedBackend final : public WrappingBackend {
 public:
  HostSpeedBackend(std::unique_ptr<Backend> sim, double speed) : WrappingBackend(std::move(sim)), speed_(speed) {}

  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    auto result = inner().Execute(plan);
    if (!result.ok()) return result;
    result->elapsed = Scaled(result->elapsed);
    // The stages summed to elapsed; scaled one by one they may not, by rounding: the
    // last takes up the difference.
    TimeNs sum = 0;
    for (TimeNs& stage : result->stages) sum += stage = Scaled(stage);
    if (!result->stages.empty()) result->stages.back() += result->elapsed - sum;
    return result;
  }
  std::optional<TimeNs> PredictPrefillTime(int32_t num_tokens) const override {
    const std::optional<TimeNs> t = inner().PredictPrefillTime(num_tokens);
    return t ? std::optional<TimeNs>(Scaled(*t)) : std::nullopt;
  }

 private:
  TimeNs Scaled(TimeNs t) const { return static_cast<TimeNs>(std::llround(static_cast<double>(t) * speed_)); }
  double speed_;
};

}  // namespace

Status ValidateAtHostSpeed(LoadValidation& v, const std::string& dir, bool progress) {
  SERVELAB_CHECK(!v.host.steps.empty());
  AtHostSpeed at;
  at.speed = v.host.Speed();
  if (!(at.speed >= 1 / kMaxHostSpeed && at.speed <= kMaxHostSpeed)) return Status::Ok();
  std::vector<StepComparison> steps = v.steps;
  for (StepComparison& step : steps) step.predicted_s *= at.speed;
  at.step_error = ErrorStats::Of(RelativeErrors(steps, StepKind::kAll));
  at.decode_step_error = ErrorStats::Of(RelativeErrors(steps, StepKind::kDecodeOnly));
  at.mixed_step_error = ErrorStats::Of(RelativeErrors(steps, StepKind::kMixed));
  const double speed = at.speed;
  auto run = validation_internal::RunTwin(
      v.sim_config, (fs::path(dir) / "sim_at_host_speed").string(), progress,
      [speed](std::unique_ptr<Backend> sim, int32_t) -> std::unique_ptr<Backend> {
        return std::make_unique<HostSpeedBackend>(std::move(sim), speed);
      });
  if (!run.ok()) return run.status();
  at.sim = *run;
  at.metrics = CompareRuns(v.engine, at.sim);
  v.at_host_speed = std::move(at);
  return Status::Ok();
}

std::string AtHostSpeedMarkdown(const std::vector<LoadValidation>& loads) {
  std::string rows;
  for (const LoadValidation& v : loads) {
    if (!v.at_host_speed) continue;
    const AtHostSpeed& at = *v.at_host_speed;
    char row[320];
    std::snprintf(row, sizeof row, " | %.3f | %.2f | %+.2f | %.2f | %.2f |", at.speed, at.step_error.mape,
                  at.step_error.bias, at.decode_step_error.mape, at.mixed_step_error.mape);
    rows += "| " + v.label + row;
    for (const char* metric : {"ttft", "tpot", "e2e"}) {
      for (const char* statistic : {"p50", "p99"}) {
        double error = std::nan("");
        for (const MetricComparison& m : at.metrics) {
          if (m.metric == metric && m.statistic == statistic) error = m.error_pct;
        }
        std::snprintf(row, sizeof row, " %+.2f |", error);
        rows += row;
      }
    }
    rows += "\n";
  }
  if (rows.empty()) return "";
  return "\nAt the host's speed around the run (not the validation's figures, which stay as measured: "
         "what they would be on a host as fast as the profiled one): each simulated step's time "
         "multiplied by the engine's reference steps' time over the simulator's (their mean before "
         "and after the run), on the engine's steps and in a simulated run of its own "
         "(`sim_at_host_speed/`), error %:\n\n| load | host speed | step MAPE | step bias | decode MAPE "
         "| mixed MAPE | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | E2E p50 | E2E p99 |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|\n" + rows;
}

}  // namespace servelab
