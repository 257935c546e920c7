#pragma once
// Running one of plots/*.py from the source tree this binary was built from, with
// Debian's /usr/bin/python3: a figure is never required for a command to succeed, so a
// missing interpreter, matplotlib or pandas, or a failed script, is a note on stderr.
#include <string>
#include <vector>

namespace servelab {

// Runs plots/`script` with `args`; notes on stderr start with "servelab <command>: note:".
// Returns true when the script ran and exited 0.
bool RunPlotScript(const std::string& command, const std::string& script,
                   const std::vector<std::string>& args);
// The same with another interpreter and scripts' folder (tests). The interpreter runs
// the script only once matplotlib and pandas import; its exit status 86 says they did
// not (a skip, noted as such).
bool RunPlotScript(const std::string& command, const std::string& script,
                   const std::vector<std::string>& args, const std::string& python,
                   const std::string& scripts_dir);

// Removes the figure at `path` (a regular file only) before its tables are drawn anew or
// not at all (--no-plots, a failed script): an earlier run's figure beside new tables
// would describe other runs.
void RemoveStalePlot(const std::string& path);

}  // namespace servelab
