// `servelab sweep`: every point of the experiment's `sweep:` grid, each into its own
// result folder, and one sweep.csv over all of them.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "driver/output_dir.h"
#include "driver/sweep_config.h"
#include "cli/sweep_report.h"
#include "cli/sweep_runner.h"
#include "cli/task_pool.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

int Report(const Status& status) { return ReportFailure("sweep", status); }

constexpr const char* kSweepHelp = R"(
The experiment file's top-level `sweep:` block is a grid over config keys; each value
is any YAML value, applied like --set (after the --set options):

  sweep:
    scheduler.policy: [fcfs, {name: sjf, predictor: noisy}]
    workload.arrival.rate: [4, 8, 12]

Points are the cartesian product, axes in file order, the last axis varying fastest
(at most 10000). Every point is validated before anything runs. Each runs into
DIR/<point>/ with the files of `servelab run`; <point> joins "<key>-<value>" per axis
with "_": "policy-sjf_rate-8". The key is shortened to its last dotted part(s) that tell
the axes apart; in the value (as written, a leading "{name: " dropped) every run of
characters other than letters, digits and . _ + - becomes one '-'; clashes get "~2".
DIR/sweep.csv has one row per point in grid order: the axis values, folder, status and
the main metrics. Results are byte-identical whatever --jobs is, and under mpirun.
A sweep interrupted and started again into the same DIR runs only the points whose
folder does not already hold this very run (its config.resolved.yaml, written last);
--fresh runs them all.
Exit status: 0 success, 2 bad input (nothing ran), 1 a point failed (the others ran).
)";

}  // namespace

int SweepCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab sweep EXPERIMENT.yaml [options]");
  std::vector<std::string> sets;
  std::string out_dir;
  int jobs = 0;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key at every point: --set scheduler.max_num_seqs=64 (repeatable)")
      ("out", po::value<std::string>(&out_dir), "sweep folder (default: output.dir, else "
       "results/<name>)")
      ("jobs,j", po::value<int>(&jobs), "points run at once (default: every core)")
      ("replicates", po::value<int>(),
       "run every point with N seeds: means and 95% intervals (the replicates key)")
      ("fresh", "run every point again, even those an earlier run of this command into the "
       "folder completed")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("sweep", args, options,
                                             kSweepHelp,
                                             vm, experiment_path)) {
    return *exit;
  }
  if (Status checked = CheckJobs(jobs); !checked.ok()) return Report(checked);

  if (vm.count("replicates")) sets.push_back("replicates=" + std::to_string(vm["replicates"].as<int>()));
  auto sweep = LoadSweep(experiment_path, sets);
  if (!sweep.ok()) return Report(sweep.status());
  const std::string dir = out_dir.empty() ? sweep->points[0].config.output.dir : out_dir;
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  std::vector<PointOutcome> results;
  const int exit_code = ValidateAndRun(*sweep, dir, ResolveJobs(jobs), progress, "sweep",
                                       {"sweep.csv"}, !vm.count("fresh"), results);
  if (exit_code == kExitBadInput || TaskRank() != 0) return exit_code;

  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());
  Status written = (*folder)->WriteFile("sweep.csv", SweepCsv(*sweep, results));
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  size_t failed = 0;
  for (const auto& r : results) failed += r.ok() ? 0 : 1;
  std::cout << "sweep: " << results.size() << " points";
  if (failed > 0) std::cout << ", " << failed << " failed";
  std::cout << "\nresults: " << dir << "/sweep.csv\n";
  return exit_code;
}

}  // namespace servelab
