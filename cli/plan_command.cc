// `servelab plan`: the highest arrival rate each candidate deployment (a point of the
// file's `sweep:` grid, or the experiment alone) serves within the SLO, what it costs,
// and the cheapest deployment for a target rate (or the most rate for a budget).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/plan_report.h"
#include "cli/plot_script.h"
#include "cli/sweep_runner.h"
#include "cli/task_pool.h"
#include "core/read_file.h"
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
plan.png (tokens/s per GPU against tokens/s per user, with the Pareto front), and
DIR/candidates/<candidate>.json as each search ends: a plan interrupted and started
again searches only the candidates not recorded there for the same config (--fresh:
all). Results are byte-identical whatever --jobs is, and under mpirun -n N.
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
  // Its record's file name: the name made safe as a sweep point's folder is (a name such
  // as /tmp/x or ../x must not leave DIR/candidates).
  sweep.points.push_back(SweepPoint{{}, SanitizeName(single->name), std::move(single).value()});
  return sweep;
}

// DIR/candidates/<candidate>.json: {"config": its resolved config, "plan": its
// CandidatePlan}. An earlier search counts when it was of this very config.
std::optional<CandidatePlan> EarlierSearch(const std::filesystem::path& path,
                                           const ExperimentConfig& config) {
  auto text = ReadRegularFile(path.string(), kMaxConfigFileBytes, "plan record");
  if (!text.ok()) return std::nullopt;
  auto json = nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("config") || !json.contains("plan") ||
      json["config"] != EmitResolvedConfig(config)) {
    return std::nullopt;
  }
  auto plan = CandidatePlan::FromJson(json["plan"]);
  if (!plan.ok()) return std::nullopt;
  return std::move(plan).value();
}

Status RecordSearch(const std::filesystem::path& path, const ExperimentConfig& config,
                    const std::string& plan_json) {
  nlohmann::ordered_json record;
  record["config"] = EmitResolvedConfig(config);
  record["plan"] = nlohmann::ordered_json::parse(plan_json);
  if (record["plan"].value("code", -1) != static_cast<int>(StatusCode::kOk)) return Status::Ok();
  auto folder = OutputDir::Open(path.parent_path().string());
  if (!folder.ok()) return folder.status();
  SERVELAB_RETURN_IF_ERROR((*folder)->WriteFile(path.filename().string(), record.dump(1) + "\n"));
  return (*folder)->Commit();
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
      ("fresh", "search every candidate again, even those an earlier plan into the folder "
       "searched")
      ("no-progress", "never draw the progress line");
  std::string plan_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("plan", args, options, kPlanHelp, vm, plan_path)) {
    return *exit;
  }
  if (Status checked = CheckJobs(jobs); !checked.ok()) return Report(checked);
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

  // Where the plan goes, checked before any search (and creating nothing: bad input writes
  // nothing).
  Status places = CheckOutputPlaces(dir, {"plan.csv", "plan.md"});
  if (places.ok()) places = CheckOutputPlaces((std::filesystem::path(dir) / "candidates").string(), {});
  if (!places.ok()) return Report(places);

  const size_t n = candidates->points.size();
  // Candidates an earlier, interrupted plan into `dir` already searched (rank 0 decides).
  const std::filesystem::path searched_dir = std::filesystem::path(dir) / "candidates";
  auto record_of = [&](size_t i) { return searched_dir / (candidates->points[i].folder + ".json"); };
  std::vector<bool> skip(n, false);
  std::vector<std::optional<CandidatePlan>> earlier(n);
  if (!vm.count("fresh") && TaskRank() == 0) {
    for (size_t i = 0; i < n; ++i) {
      earlier[i] = EarlierSearch(record_of(i), candidates->points[i].config);
      skip[i] = earlier[i].has_value();
    }
  }
  const size_t todo = static_cast<size_t>(std::count(skip.begin(), skip.end(), false));
  if (todo < n) {
    std::cerr << "servelab plan: note: " << n - todo << " of " << n << " candidates already "
              << "searched in " << searched_dir.string() << " are not searched again (--fresh "
              << "searches every one)\n";
  }
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  Status recorded = Status::Ok();
  auto searched = RunTasks(
      n, ResolveJobs(jobs),
      [&](size_t i) { return PlanCandidate(candidates->points[i].config).ToJson().dump(); },
      [&](size_t i, const std::string& result, size_t done) {
        // A search is recorded at once, so that a plan interrupted later resumes past it.
        // (A candidate that cannot run is not: checking it again costs nothing, and bad
        // input writes nothing.)
        if (Status s = RecordSearch(record_of(i), candidates->points[i].config, result); !s.ok()) {
          recorded = s;
        }
        if (!progress) return;
        std::fprintf(stderr, "\rplan: %zu/%zu candidates searched ", done, todo);
        if (done == todo) std::fputs("\r\033[K", stderr);
      },
      skip);
  if (!searched) return kExitOk;  // another rank writes the plan
  if (!recorded.ok()) return Report(recorded);
  std::vector<CandidatePlan> plans;
  for (size_t i = 0; i < n; ++i) {
    if (earlier[i]) {
      plans.push_back(std::move(*earlier[i]));
      continue;
    }
    auto plan = CandidatePlan::FromJson(nlohmann::ordered_json::parse((*searched)[i]));
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
  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());
  Status written = (*folder)->WriteFile("plan.csv", PlanCsv(*candidates, plans));
  if (written.ok()) written = (*folder)->WriteFile("plan.md", markdown);
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  RemoveStalePlot(dir + "/plan.png");
  if (!vm.count("no-plots")) {
    RunPlotScript("plan", "plan.py", {dir + "/plan.csv", "--out", dir + "/plan.png"});
  }
  std::cout << markdown << "\nresults: " << dir << "/plan.csv\n";
  return runtime_failure ? kExitRuntimeError : kExitOk;
}

}  // namespace servelab
