// servelab: LLM-serving scheduling laboratory. See `servelab --help`.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/task_pool.h"
#include "core/text.h"

namespace {

constexpr const char* kUsage =
    "usage: servelab <command> [options]\n"
    "\n"
    "commands:\n"
    "  run EXPERIMENT.yaml [--set key.path=value ...] [--out DIR]\n"
    "                      run an experiment (on the simulator, or backend: engine)\n"
    "  sweep EXPERIMENT.yaml [--set ...] [--out DIR] [--jobs N]\n"
    "                      run every point of the file's `sweep:` grid, and sweep.csv\n"
    "  compare EXPERIMENT.yaml --policies a,b,... [--set ...] [--out DIR] [--jobs N]\n"
    "                      the same requests under each policy: table, compare.csv, plots\n"
    "  plan PLAN.yaml [--target-rate R | --budget USD] [--set ...] [--out DIR]\n"
    "                      the highest rate each candidate deployment serves within the\n"
    "                      SLO, its cost, and the cheapest deployment for a peak\n"
    "  list gpus|models|policies|cost-models\n"
    "                      show the catalogs and registries\n"
    "  memory --model M --gpu G [--tp N] [--weight-dtype D] [--kv-dtype D] ...\n"
    "                      weights + KV cache + activations + overhead: does it fit?\n"
    "  make-model --arch A --layers N --hidden H ... --out DIR | --from MODEL ... --out DIR\n"
    "                      a Hugging Face model folder with seeded random weights\n"
    "  profile EXPERIMENT.yaml [--out PROFILE.csv] [--repeats N] ...\n"
    "                      time the engine per op and per step over the steps it runs\n"
    "  calibrate PROFILE.csv... --out MODEL.yaml [--evaluate OTHER.csv ...]\n"
    "                      fit per-op time models to measured profiles; their errors\n"
    "  validate EXPERIMENT.yaml [--cost-model MODEL.yaml] [--out DIR] [--set ...]\n"
    "                      the same requests on the engine and the simulator, per load:\n"
    "                      step-time and TTFT/TPOT/ITL/E2E errors\n"
    "\n"
    "`servelab <command> --help` describes each command's options.\n"
    "Exit status: 0 success, 2 bad input or usage, 1 runtime failure.\n";

}  // namespace

namespace {

int Dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return servelab::kExitBadInput;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return servelab::kExitOk;
  }
  if (command == "--version") {
    std::puts("servelab 0.1.0");
    return servelab::kExitOk;
  }
  if (command == "run") return servelab::RunCommand(args);
  if (command == "sweep") return servelab::SweepCommand(args);
  if (command == "compare") return servelab::CompareCommand(args);
  if (command == "plan") return servelab::PlanCommand(args);
  if (command == "list") return servelab::ListCommand(args);
  if (command == "memory") return servelab::MemoryCommand(args);
  if (command == "make-model") return servelab::MakeModelCommand(args);
  if (command == "calibrate") return servelab::CalibrateCommand(args);
  if (command == "profile") return servelab::ProfileCommand(args);
  if (command == "validate") return servelab::ValidateCommand(args);
  std::fprintf(stderr, "servelab: unknown command '%s'\n\n%s", servelab::Printable(command).c_str(), kUsage);
  return servelab::kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  if (!servelab::StartTasks(&argc, &argv)) return servelab::kExitBadInput;
  int exit_code = servelab::kExitRuntimeError;
  try {
    exit_code = Dispatch(argc, argv);
  } catch (const std::bad_alloc&) {
    // Inputs are sized before they are read, but a fit or a run can still outgrow the
    // memory a limit (ulimit -v, a container) leaves: a message and exit 1, the stack
    // unwound (staging folders removed, earlier results untouched), not an abort.
    std::fprintf(stderr, "servelab: out of memory\n");
  }
  servelab::FinishTasks();
  return exit_code;
}
