#pragma once
// The command line shared by `run`, `sweep`, `compare`, `profile` and the rest: the
// command's options plus positional EXPERIMENT.yaml (one, or for `profile` several),
// --help, and the usage errors (exit 2).
#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace servelab {

// Prints "servelab <command>: <message>" on stderr ("servelab: ..." for an empty
// command) and returns the exit status for it: 2 for bad input, 1 otherwise.
int ReportFailure(const std::string& command, const Status& status);

// Parses `args` into `vm` and `experiment_path`. Returns the exit status to end with
// now (0 after printing --help with `help_epilogue`; 2 after a usage error or a missing
// EXPERIMENT.yaml, printed on stderr as "servelab <command>: ..."), or nullopt to go on.
std::optional<int> ParseExperimentCommandLine(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options, const std::string& help_epilogue,
    boost::program_options::variables_map& vm, std::string& experiment_path);

// The same with one or more EXPERIMENT.yaml, at most `max_experiments` (-1: any number),
// into `experiment_paths` in the order given; --out may be repeatable (each checked
// non-empty).
std::optional<int> ParseExperimentsCommandLine(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options, const std::string& help_epilogue,
    boost::program_options::variables_map& vm, std::vector<std::string>& experiment_paths,
    int max_experiments);

}  // namespace servelab
