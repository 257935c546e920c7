// `servelab plan`: the highest arrival rate each candidate deployment (a point of the
// file's `sweep:` grid, or the experiment alone) serves within the SLO, what it costs,
// and the cheapest deployment for a target rate (or the most rate for a budget).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/plan_report.h"
#include "cli/plot_script.h"
#include "cli/sweep_runner.h"
#include "cli/task_pool.h"
#include "core/text.h"
#include "driver/config_yaml.h"
#include "driver/output_dir.h"
#include "sim/capacity_planner.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

int Report(const Status& status) { return ReportFailure("plan", status); }

constexpr const char* kPlanHelp = R"(
PLAN.yaml is an experiment whose `sweep:` block (if any) is the search space: every
point is a candidate deployment (GPU, tensor_parallel, replicas, max_num_seqs, policy:
any key). Its `slo:` section holds the targets and its `plan:` section how to read
and search them (servelab's README, "Capacity planning"):

  slo: {ttft_ms: 1000, tpot_ms: 100}
  plan: {statistic: p90, attainment: 0, min_rate: 0.1, max_rate: 10000,
         tolerance: 0.01, target_rate: 20, budget_per_month: 0}

For each candidate that passes the memory check, the highest workload.arrival.rate
whose simulated run meets every target: doubling from min_rate until a rate misses,
then geometric bisection until the bracket is within tolerance; the answer is a rate
that was simulated and met. Writes DIR/plan.csv (one row per candidate), plan.md and
plan.png (tokens/s per GPU against tokens/s per user, with the Pareto front).
Results are byte-identical whatever --jobs is.
Exit status: 0 success, 2 bad input (nothing ran, or no candidate can run), 1 a
candidate failed while running.
)";

// A plan needs something to meet.
Status CheckTargets(const ExperimentConfig& c) {
  if (c.slo.ttft_ms > 0 || c.slo.tpot_ms > 0 || c.slo.e2e_ms > 0 || c.plan.attainment > 0) {
    return Status::Ok();
  }
  return InvalidArgument(c.Where("slo") +
                         ": a plan needs a target: slo.ttft_ms, slo.tpot_ms, slo.e2e_ms or "
                         "plan.attainment");
}

// The candidates: the sweep's points, or the experiment as the one candidate.
StatusOr<Sweep> LoadCandidates(const std::string& path, const std::vector<std::string>& sets) {
  LoadNotes notes;
  auto single = LoadExperiment(path, sets, &notes);
  if (!single.ok()) return single.status();
  if (notes.sweep_line > 0) return LoadSweep(path, sets);
  Sweep sweep;
  sweep.points.push_back(SweepPoint{{}, single->name, std::move(single).value()});
  return sweep;
}

}  // namespace

int PlanCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab plan PLAN.yaml [options]");
  std::vector<std::string> sets;
  std::string out_dir;
  int jobs = 0;
  double target_rate = -1, budget = -1;
  int replicates = 0;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key of every candidate: --set slo.ttft_ms=500 (repeatable)")
      ("out", po::value<std::string>(&out_dir), "plan folder (default: output.dir, else "
       "results/<name>)")
      ("jobs,j", po::value<int>(&jobs), "candidates searched at once (default: every core)")
      ("target-rate", po::value<double>(&target_rate),
       "the peak to serve, req/s: the cheapest deployment for it (plan.target_rate)")
      ("budget", po::value<double>(&budget),
       "USD a month: the deployment serving the most within it (plan.budget_per_month)")
      ("replicates", po::value<int>(&replicates),
       "search each candidate with N seeds: the max rate's mean and 95% interval (replicates)")
      ("no-plots", "do not draw plan.png")
      ("no-progress", "never draw the progress line");
  std::string plan_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("plan", args, options, kPlanHelp, vm, plan_path)) {
    return *exit;
  }
  if (jobs < 0) return Report(InvalidArgument("--jobs: must be at least 1 (0 = every core)"));
  // The flags are the plan keys, checked by the parser like any --set.
  if (vm.count("target-rate")) sets.push_back("plan.target_rate=" + FormatDouble(target_rate));
  if (vm.count("budget")) sets.push_back("plan.budget_per_month=" + FormatDouble(budget));
  if (vm.count("replicates")) sets.push_back("replicates=" + std::to_string(replicates));

  auto candidates = LoadCandidates(plan_path, sets);
  if (!candidates.ok()) return Report(candidates.status());
  const ExperimentConfig& base = candidates->points[0].config;
  for (const SweepPoint& point : candidates->points) {
    if (Status s = CheckTargets(point.config); !s.ok()) return Report(s);
  }
  const std::string dir = out_dir.empty() ? base.output.dir : out_dir;
  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());

  const size_t n = candidates->points.size();
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  auto searched = RunTasks(
      n, ResolveJobs(jobs),
      [&](size_t i) { return PlanCandidate(candidates->points[i].config).ToJson().dump(); },
      [&](size_t done) {
        if (!progress) return;
        std::fprintf(stderr, "\rplan: %zu/%zu candidates searched ", done, n);
        if (done == n) std::fputs("\r\033[K", stderr);
      });
  if (!searched) return kExitOk;  // another rank writes the plan
  std::vector<CandidatePlan> plans;
  for (const std::string& json : *searched) {
    auto plan = CandidatePlan::FromJson(nlohmann::ordered_json::parse(json));
    if (!plan.ok()) return Report(plan.status());
    plans.push_back(std::move(plan).value());
  }

  // Bad input that only running shows (the model does not fit, a trace workload) leaves
  // a candidate out; when it leaves every one out there is no plan.
  std::vector<std::pair<std::string, std::string>> failures;
  bool runtime_failure = false;
  for (size_t i = 0; i < n; ++i) {
    if (plans[i].status.ok()) continue;
    failures.emplace_back(candidates->points[i].folder, plans[i].status.message());
    runtime_failure = runtime_failure || !plans[i].status.IsBadInput();
  }
  if (failures.size() == n) {
    const Status all = CombinePointErrors(failures, n);
    std::cerr << "servelab plan: no candidate can run\n";
    return Report(runtime_failure ? Internal(all.message()) : all);
  }
  for (const auto& [name, message] : failures) {
    std::cerr << "servelab plan: note: candidate " << name << " left out: " << Printable(message)
              << "\n";
  }

  const PlanConfig& plan = base.plan;
  std::optional<Deployment> cheapest, within;
  if (plan.target_rate > 0) cheapest = CheapestFor(plans, plan.target_rate, plan.hours_per_month);
  if (plan.budget_per_month > 0) {
    within = MostWithin(plans, plan.budget_per_month, plan.hours_per_month);
  }
  const std::string markdown = PlanMarkdown(*candidates, plans, base, cheapest, within);
  Status written = (*folder)->WriteFile("plan.csv", PlanCsv(*candidates, plans));
  if (written.ok()) written = (*folder)->WriteFile("plan.md", markdown);
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  if (!vm.count("no-plots")) {
    RunPlotScript("plan", "plan.py", {dir + "/plan.csv", "--out", dir + "/plan.png"});
  }
  std::cout << markdown << "\nresults: " << dir << "/plan.csv\n";
  return runtime_failure ? kExitRuntimeError : kExitOk;
}

}  // namespace servelab
