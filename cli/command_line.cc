#include "cli/command_line.h"

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

std::optional<int> ParseExperimentCommandLine(const std::string& command,
                                              const std::vector<std::string>& args,
                                              const po::options_description& options,
                                              const std::string& help_epilogue,
                                              po::variables_map& vm,
                                              std::string& experiment_path) {
  po::options_description hidden;
  hidden.add_options()("experiment", po::value<std::string>(&experiment_path));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab " << command << ": " << e.what() << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options << help_epilogue;
    return kExitOk;
  }
  if (experiment_path.empty()) {
    std::cerr << "servelab " << command << ": missing EXPERIMENT.yaml\n\n" << options;
    return kExitBadInput;
  }
  // An --out given empty (an unset shell variable) would silently mean the default place.
  if (vm.count("out") && vm["out"].as<std::string>().empty()) {
    std::cerr << "servelab " << command << ": --out: empty (leave it out for the default)\n";
    return kExitBadInput;
  }
  return std::nullopt;
}

}  // namespace servelab
