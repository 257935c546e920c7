// `servelab run`: parse and validate an experiment, simulate it, write the result folder
// (cli/run_experiment.h).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "driver/config_yaml.h"
#include "cli/run_experiment.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

int Report(const Status& status) { return ReportFailure("", status); }

}  // namespace

constexpr const char* kRunHelp =
    "\nWrites requests.csv, clients.csv, steps.csv, summary.json, summary.md,\n"
    "trace.json and config.resolved.yaml into the result folder. Exit status:\n"
    "0 success, 2 bad input, 1 runtime failure.\n";

int RunCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab run EXPERIMENT.yaml [options]");
  std::vector<std::string> sets;
  std::string out_dir;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key: --set scheduler.max_num_seqs=64 (repeatable; the value is YAML)")
      ("out", po::value<std::string>(&out_dir), "result folder (default: output.dir, "
       "else results/<name>)")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("run", args, options, kRunHelp, vm,
                                             experiment_path)) {
    return *exit;
  }

  LoadNotes notes;
  auto config = LoadExperiment(experiment_path, sets, &notes);
  if (!config.ok()) return Report(config.status());
  if (notes.sweep_line > 0) {
    std::fprintf(stderr, "servelab run: note: %s:%d: the sweep block is ignored; this runs the "
                 "base experiment (`servelab sweep` runs the grid)\n",
                 experiment_path.c_str(), notes.sweep_line);
  }
  if (!out_dir.empty()) config->output.dir = out_dir;
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  auto summary = RunExperimentToFolder(*config, config->output.dir, progress);
  if (!summary.ok()) return Report(summary.status());
  std::cout << summary->ToText() << "results: " << config->output.dir << "\n";
  return kExitOk;
}

}  // namespace servelab
