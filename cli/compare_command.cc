// `servelab compare`: one experiment under several scheduling policies, the same request
// stream for each (same seed): a sweep on the single axis scheduler.policy, plus a
// Markdown table and comparison plots.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/plot_script.h"
#include "cli/sweep_report.h"
#include "cli/sweep_runner.h"
#include "cli/task_pool.h"
#include "core/text.h"
#include "driver/output_dir.h"
#include "driver/sweep_config.h"

namespace servelab {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int Report(const Status& status) { return ReportFailure("compare", status); }

bool IsSafeWord(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '+' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

// "fcfs,sjf:predictor=noisy:sigma=1.0" -> the scheduler.policy axis: "fcfs" and
// "{name: sjf, predictor: noisy, sigma: 1.0}". Names, keys and values are words of
// letters, digits and . _ + -.
StatusOr<SweepAxisSpec> PolicyAxis(const std::string& text) {
  SweepAxisSpec axis;
  axis.key = "scheduler.policy";
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string entry = text.substr(start, comma - start);
    start = comma + 1;
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    const std::string where = "--policies '" + entry + "'";
    std::vector<std::string> parts;
    for (size_t from = 0; from <= entry.size();) {
      const size_t colon = std::min(entry.find(':', from), entry.size());
      parts.push_back(entry.substr(from, colon - from));
      from = colon + 1;
    }
    if (!IsSafeWord(parts[0])) {
      return InvalidArgument(where + ": expected name[:key=value...], e.g. sjf:predictor=noisy");
    }
    std::string yaml = parts[0];
    if (parts.size() > 1) {
      yaml = "{name: " + parts[0];
      for (size_t i = 1; i < parts.size(); ++i) {
        const size_t eq = parts[i].find('=');
        const std::string key = parts[i].substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
        if (!IsSafeWord(key) || !IsSafeWord(value) || key == "name") {
          return InvalidArgument(where + ": '" + parts[i] + "': expected key=value, each a "
                                 "word of letters, digits and . _ + -");
        }
        yaml += ", " + key + ": " + value;
      }
      yaml += "}";
    }
    if (!seen.insert(entry).second) return InvalidArgument(where + ": given twice");
    axis.yaml_values.push_back(yaml);
    axis.labels.push_back(entry);
    axis.wheres.push_back(where);
  }
  return axis;
}

// plots/compare.py over the result folders; never fails the command, says why not.
void DrawPlots(const std::string& dir, const std::vector<std::string>& folders,
               const std::vector<std::string>& labels) {
  std::vector<std::string> args;
  std::string joined;
  for (size_t i = 0; i < folders.size(); ++i) {
    args.push_back((fs::path(dir) / folders[i]).string());
    joined += (i == 0 ? "" : ",") + labels[i];
  }
  args.insert(args.end(), {"--labels", joined, "--out", dir});
  RunPlotScript("compare", "compare.py", args);
}

}  // namespace

constexpr const char* kCompareHelp =
    "\nRuns the experiment once per policy (scheduler.policy set like --set; the\n"
    "file's sweep block, if any, is ignored): the same seed, so the same request\n"
    "stream. Writes DIR/<policy>/ (the files of `servelab run`; the folder is the\n"
    "entry with ':' and '=' turned into '-'), DIR/compare.csv (the columns of\n"
    "sweep.csv), DIR/compare.md (the table printed on stdout) and DIR/compare.png\n"
    "(plots/compare.py with /usr/bin/python3; skipped with a note if that fails).\n"
    "Exit status: 0 success, 2 bad input (nothing ran), 1 a policy's run failed.\n";

int CompareCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab compare EXPERIMENT.yaml --policies a,b,... [options]");
  std::vector<std::string> sets;
  std::string policies, out_dir;
  int jobs = 0;
  options.add_options()
      ("help,h", "show this help")
      ("policies", po::value<std::string>(&policies),
       "comma-separated policies, each name[:key=value...]: fcfs,sjf:predictor=noisy")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key for every policy: --set workload.arrival.rate=8 (repeatable)")
      ("out", po::value<std::string>(&out_dir), "comparison folder (default: "
       "results/<name>-compare)")
      ("jobs,j", po::value<int>(&jobs), "policies run at once (default: every core)")
      ("no-plots", "do not draw compare.png")
      ("replicates", po::value<int>(),
       "run every point with N seeds: means and 95% intervals (the replicates key)")
      ("fresh", "run every point again, even those an earlier run of this command into the "
       "folder completed")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("compare", args, options, kCompareHelp, vm,
                                             experiment_path)) {
    return *exit;
  }
  if (policies.empty()) return Report(InvalidArgument("missing --policies a,b,..."));
  if (Status checked = CheckJobs(jobs); !checked.ok()) return Report(checked);
  auto axis = PolicyAxis(policies);
  if (!axis.ok()) return Report(axis.status());

  if (vm.count("replicates")) sets.push_back("replicates=" + std::to_string(vm["replicates"].as<int>()));
  auto sweep = LoadSweep(experiment_path, sets, *axis);
  if (!sweep.ok()) return Report(sweep.status());
  if (sweep->ignored_sweep_line > 0) {
    std::fprintf(stderr, "servelab compare: note: %s:%d: the sweep block is ignored\n",
                 Printable(experiment_path).c_str(), sweep->ignored_sweep_line);
  }
  const ExperimentConfig& base = sweep->points[0].config;
  const std::string dir = out_dir.empty() ? "results/" + base.name + "-compare" : out_dir;
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  std::vector<PointOutcome> results;
  const int exit_code = ValidateAndRun(*sweep, dir, ResolveJobs(jobs), progress, "compare",
                                       {"compare.csv", "compare.md"}, !vm.count("fresh"), results);
  if (exit_code == kExitBadInput || TaskRank() != 0) return exit_code;

  std::string table = CompareTable(axis->labels, results);
  if (const std::string paired = PairedTable(axis->labels, results); !paired.empty()) {
    table += "\nOver " + std::to_string(base.replicates) + " replicates (seeds derived from " +
             std::to_string(base.seed) + "; the table above is replicate 0), each policy's "
             "difference from " + axis->labels[0] + " on the same requests, with its 95% "
             "interval:\n\n" + paired;
  }
  const std::string markdown = "# " + base.name + ": policy comparison\n\nThe same request "
                               "stream (seed " + std::to_string(base.seed) + ") under each "
                               "policy; one result folder per policy. Latencies over finished "
                               "requests.\n\n" + table;
  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());
  Status written = (*folder)->WriteFile("compare.csv", SweepCsv(*sweep, results));
  if (written.ok()) written = (*folder)->WriteFile("compare.md", markdown);
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  std::cout << table << "results: " << dir << "\n";

  std::vector<std::string> folders, labels;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) continue;
    folders.push_back(sweep->points[i].folder);
    labels.push_back(axis->labels[i]);
  }
  RemoveStalePlot((fs::path(dir) / "compare.png").string());
  if (!vm.count("no-plots") && !folders.empty()) DrawPlots(dir, folders, labels);
  return exit_code;
}

}  // namespace servelab
