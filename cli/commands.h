#pragma once
// The `servelab` subcommands. Each takes the arguments after its name and returns the
// process exit status: 0 success, 2 bad input or usage, 1 runtime failure.
#include <string>
#include <vector>

namespace servelab {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitBadInput = 2;

int RunCommand(const std::vector<std::string>& args);
int ListCommand(const std::vector<std::string>& args);
int MemoryCommand(const std::vector<std::string>& args);
int SweepCommand(const std::vector<std::string>& args);
int CompareCommand(const std::vector<std::string>& args);
int MakeModelCommand(const std::vector<std::string>& args);
int CalibrateCommand(const std::vector<std::string>& args);
int ProfileCommand(const std::vector<std::string>& args);
int ValidateCommand(const std::vector<std::string>& args);
int PlanCommand(const std::vector<std::string>& args);

}  // namespace servelab
