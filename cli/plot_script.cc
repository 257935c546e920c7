#include "cli/plot_script.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

extern char** environ;

namespace servelab {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-matplotlib

// Runs `argv` without a shell; its exit status, or -1 when it could not start.
int Spawn(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
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
  const std::string path = std::string(SERVELAB_SOURCE_DIR) + "/plots/" + script;
  const char* skip = nullptr;
  if (!std::filesystem::exists(path)) {
    skip = "the plot script is not in the source tree this binary was built from";
  } else if (::access(kPython, X_OK) != 0) {
    skip = "/usr/bin/python3 is missing";
  } else if (Spawn({kPython, "-c", "import matplotlib, pandas"}, /*quiet=*/true) != 0) {
    skip = "/usr/bin/python3 lacks matplotlib or pandas (apt install python3-matplotlib "
           "python3-pandas)";
  }
  if (skip != nullptr) {
    std::fprintf(stderr, "servelab %s: note: plots skipped: %s\n", command.c_str(), skip);
    return false;
  }
  std::vector<std::string> argv = {kPython, path};
  argv.insert(argv.end(), args.begin(), args.end());
  std::fflush(stdout);
  const int rc = Spawn(argv, /*quiet=*/false);
  if (rc != 0) {
    std::fprintf(stderr, "servelab %s: note: plotting failed (%s exit %d); the results are "
                 "complete\n", command.c_str(), script.c_str(), rc);
    return false;
  }
  return true;
}

}  // namespace servelab
