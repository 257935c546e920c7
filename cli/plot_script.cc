#include "cli/plot_script.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

extern char** environ;

namespace servelab {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-matplotlib

// What the interpreter runs: matplotlib and pandas imported first, and the script run in
// the same process only when both are there (exit kNoPlotLibraries otherwise), so the
// check costs no second interpreter's start (about 0.6 s of the two imports). The
// script runs as `python3 SCRIPT ARGS...` would run it: its folder in place of `-c`'s
// working directory first on sys.path (for servelab_plots), argv[0] its path.
constexpr const char* kBootstrap =
    "import os, runpy, sys\n"
    "try:\n"
    "    import matplotlib, pandas\n"
    "except ImportError:\n"
    "    sys.exit(86)\n"
    "sys.argv = sys.argv[1:]\n"
    "here = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
    "if sys.path and sys.path[0] == '':\n"
    "    sys.path[0] = here\n"
    "else:\n"
    "    sys.path.insert(0, here)\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n";
constexpr int kNoPlotLibraries = 86;

// Runs `argv` without a shell; its exit status, or -1 when it could not start.
int Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

void RemoveStalePlot(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    std::filesystem::remove(path, ec);
  }
}

bool RunPlotScript(const std::string& command, const std::string& script,
                   const std::vector<std::string>& args) {
  return RunPlotScript(command, script, args, kPython,
                       std::string(SERVELAB_SOURCE_DIR) + "/plots");
}

bool RunPlotScript(const std::string& command, const std::string& script,
                   const std::vector<std::string>& args, const std::string& python,
                   const std::string& scripts_dir) {
  const std::string path = scripts_dir + "/" + script;
  std::string skip;
  if (!std::filesystem::exists(path)) {
    skip = "the plot script is not in the source tree this binary was built from";
  } else if (::access(python.c_str(), X_OK) != 0) {
    skip = python + " is missing";
  }
  int rc = 0;
  if (skip.empty()) {
    std::vector<std::string> argv = {python, "-c", kBootstrap, path};
    argv.insert(argv.end(), args.begin(), args.end());
    std::fflush(stdout);
    rc = Spawn(argv);
    if (rc == kNoPlotLibraries) {
      skip = python + " lacks matplotlib or pandas (apt install python3-matplotlib python3-pandas)";
    }
  }
  if (!skip.empty()) {
    std::fprintf(stderr, "servelab %s: note: plots skipped: %s\n", command.c_str(), skip.c_str());
    return false;
  }
  if (rc != 0) {
    std::fprintf(stderr, "servelab %s: note: plotting failed (%s exit %d); the results are "
                 "complete\n", command.c_str(), script.c_str(), rc);
    return false;
  }
  return true;
}

}  // namespace servelab
