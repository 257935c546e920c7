#include "cli/command_line.h"

#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "core/text.h"

namespace servelab {

int ReportFailure(const std::string& command, const Status& status) {
  std::cerr << "servelab" << (command.empty() ? "" : " " + command) << ": " << Printable(status.message())
            << "\n";
  return status.IsBadInput() ? kExitBadInput : kExitRuntimeError;
}

namespace po = boost::program_options;

std::optional<int> ParseExperimentsCommandLine(const std::string& command,
                                               const std::vector<std::string>& args,
                                               const po::options_description& options,
                                               const std::string& help_epilogue,
                                               po::variables_map& vm,
                                               std::vector<std::string>& experiment_paths,
                                               int max_experiments) {
  po::options_description hidden;
  hidden.add_options()("experiment", po::value<std::vector<std::string>>(&experiment_paths));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("experiment", max_experiments);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab " << command << ": " << Printable(e.what()) << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options << help_epilogue;
    return kExitOk;
  }
  if (experiment_paths.empty() || experiment_paths.front().empty()) {
    std::cerr << "servelab " << command << ": missing EXPERIMENT.yaml\n\n" << options;
    return kExitBadInput;
  }
  // An --out given empty (an unset shell variable) would silently mean the default place.
  if (vm.count("out")) {
    const boost::any& out = vm["out"].value();
    const auto* one = boost::any_cast<std::string>(&out);
    const auto* many = boost::any_cast<std::vector<std::string>>(&out);
    if ((one != nullptr && one->empty()) ||
        (many != nullptr && std::any_of(many->begin(), many->end(), [](const std::string& o) { return o.empty(); }))) {
      std::cerr << "servelab " << command << ": --out: empty (leave it out for the default)\n";
      return kExitBadInput;
    }
  }
  return std::nullopt;
}

std::optional<int> ParseExperimentCommandLine(const std::string& command,
                                              const std::vector<std::string>& args,
                                              const po::options_description& options,
                                              const std::string& help_epilogue,
                                              po::variables_map& vm,
                                              std::string& experiment_path) {
  std::vector<std::string> paths;
  if (auto exit = ParseExperimentsCommandLine(command, args, options, help_epilogue, vm, paths, 1)) return exit;
  experiment_path = paths.front();
  return std::nullopt;
}

}  // namespace servelab
