// `servelab profile`: the engine's runner timed per op and per step over the grid of
// steps the scheduler produces (engine/profiler.h), into a profile CSV for `calibrate`.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "driver/config_yaml.h"
#include "driver/output_dir.h"
#include "engine/profiler.h"

namespace servelab {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int Report(const Status& status) { return ReportFailure("profile", status); }

}  // namespace

constexpr const char* kProfileHelp =
    "\nTimes the engine the experiment describes (backend: engine; its model, device,\n"
    "block size and limits) over prefill chunks of 1..max_tokens tokens after cached\n"
    "prefixes and decodes of 1..max_batch sequences at contexts up to the one served:\n"
    "per op (the CPU runner times each) and per whole step, the median, p10 and p90 of\n"
    "--repeats runs after --warmup. Writes PROFILE.csv in servelab's profile layout\n"
    "(device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,vocab_size,\n"
    "layers,op,tokens,batch,context,tp,median_ms,p10_ms,p90_ms,repeats,num_experts,\n"
    "experts_per_token,expert_intermediate_size,shared_expert_intermediate_size,experts_run,\n"
    "single_row_experts; per-layer ops per layer; a mixture of experts' MLP as one op,\n"
    "moe_mlp, with the experts its layers ran), for `servelab calibrate`. Repeats run in\n"
    "passes over the whole grid unless --contiguous; in a pass each measured run follows\n"
    "--settle-ms of its own step back to back, the state a serving run's streak of small\n"
    "steps settles into. Exit status: 0 success, 2 bad input, 1 a runtime failure.\n";

int ProfileCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab profile EXPERIMENT.yaml [options]");
  std::vector<std::string> sets;
  std::string out;
  ProfileOptions profile;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key: --set engine.device=cuda (repeatable)")
      ("out", po::value<std::string>(&out), "the profile to write (default results/<name>-profile.csv)")
      ("warmup", po::value<int32_t>(&profile.warmup)->default_value(2), "unmeasured runs per step")
      ("warmup-ms", po::value<double>(&profile.warmup_ms)->default_value(25),
       "and at least this long, per step")
      ("settle-ms", po::value<double>(&profile.settle_ms)->default_value(ProfileOptions().settle_ms),
       "before each measured run, the same step back to back for about this long (0: none)")
      ("repeats", po::value<int32_t>(&profile.repeats)->default_value(7), "measured runs per step")
      ("max-tokens", po::value<int32_t>(&profile.max_tokens)->default_value(0),
       "longest prefill chunk (0: scheduler.max_num_batched_tokens)")
      ("max-batch", po::value<int32_t>(&profile.max_batch)->default_value(0),
       "largest decode batch (0: scheduler.max_num_seqs)")
      ("max-context", po::value<int32_t>(&profile.max_context)->default_value(0),
       "longest context (0: the one the engine serves)")
      ("contiguous", "each step's repeats back to back (default: in passes over the grid)")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("profile", args, options, kProfileHelp, vm,
                                             experiment_path)) {
    return *exit;
  }
  if (!(profile.settle_ms >= 0 && profile.settle_ms <= 60000)) {
    return Report(InvalidArgument("--settle-ms: must be in [0, 60000] (milliseconds)"));
  }
  profile.interleave = vm.count("contiguous") == 0;
  auto config = LoadExperiment(experiment_path, sets);
  if (!config.ok()) return Report(config.status());
  if (out.empty()) out = "results/" + config->name + "-profile.csv";
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  if (progress) {
    profile.on_progress = [](int32_t done, int32_t total) {
      std::fprintf(stderr, "\r  profile: %d/%d steps timed ", done, total);
      if (done == total) std::fputs("\r\033[K", stderr);
    };
  }
  auto rows = ProfileEngine(*config, profile);
  if (!rows.ok()) return Report(rows.status());
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  for (const ProfileRow& r : *rows) WriteProfileRow(csv, r);
  const fs::path path(out);
  auto folder = OutputDir::Open(path.has_parent_path() ? path.parent_path().string() : ".");
  if (!folder.ok()) return Report(folder.status());
  Status written = (*folder)->WriteFile(path.filename().string(), csv.str());
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  std::printf("%zu measurements of %s on %s\nprofile: %s\n", rows->size(),
              config->model.name.c_str(), rows->empty() ? "?" : rows->front().device.c_str(),
              out.c_str());
  return kExitOk;
}

}  // namespace servelab
