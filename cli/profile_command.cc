// `servelab profile`: the engine's runner timed per op and per step over the grid of
// steps the scheduler produces (engine/profiler.h), into a profile CSV for `calibrate`.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "core/text.h"
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
    "single_row_experts,graph_rows,graph_context,after_prefill,prefill_before; per-layer\n"
    "ops per layer; a mixture of experts' MLP as one op, moe_mlp, with the experts its\n"
    "layers ran; a decode step the CUDA runner replayed as a graph, the graph's rows and\n"
    "context bucket, else 0 and 0), for `servelab calibrate`. Repeats run in passes over\n"
    "the whole grid unless --contiguous; in a pass each measured run follows\n"
    "--settle-ms of its own step back to back, the state a serving run's streak of small\n"
    "steps settles into, and after each pass decodes of 1, 4 and max_batch sequences are\n"
    "timed one by one right after a prefill chunk, --after-prefill-steps of them\n"
    "(step_after_prefill rows: the first decodes after a compute-bound step run slower\n"
    "than settled ones). In passes, each measured run's times are divided by the host's\n"
    "speed around it: the median, over the --drift-window - 1 runs measured around it,\n"
    "of their times over their rows' medians (0: none). With 5 repeats or more it prints\n"
    "how far each profile's whole steps moved within their rows (p10 to p90 over the\n"
    "median, the median and p90 of that over the rows; and before the drift was taken\n"
    "out), and a note when the median is above 15%: the host moved during the profile,\n"
    "and a fit of it carries that; with --max-spread P, a median above P ends the\n"
    "command with exit status 1 once every profile is written.\n\n"
    "Several experiments (model shapes to fit together) are profiled together, every\n"
    "model loaded at once, each pass running over each experiment's grid in turn: a host\n"
    "whose speed changes during the profile changes every shape's rows alike, where\n"
    "profiles taken one after another each carry their own hour's speed, which a fit\n"
    "across the shapes would read as the shapes' difference. One --out per experiment, in\n"
    "their order, or none (results/<name>-profile.csv each). Exit status: 0 success, 2 bad\n"
    "input, 1 a runtime failure.\n";

int ProfileCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab profile EXPERIMENT.yaml... [options]");
  std::vector<std::string> sets;
  std::vector<std::string> outs;
  ProfileOptions profile;
  const ProfileOptions defaults;
  double max_spread = -1;  // off
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key of every experiment: --set engine.device=cuda (repeatable)")
      ("out", po::value<std::vector<std::string>>(&outs)->composing(),
       "the profile to write, one per experiment (default results/<name>-profile.csv)")
      ("warmup", po::value<int32_t>(&profile.warmup)->default_value(defaults.warmup), "unmeasured runs per step")
      ("warmup-ms", po::value<double>(&profile.warmup_ms)->default_value(defaults.warmup_ms),
       "and at least this long, per step")
      ("settle-ms", po::value<double>(&profile.settle_ms)->default_value(defaults.settle_ms),
       "before each measured run, the same step back to back for about this long (0: none)")
      ("repeats", po::value<int32_t>(&profile.repeats)->default_value(defaults.repeats), "measured runs per step")
      ("after-prefill-steps", po::value<int32_t>(&profile.after_prefill_steps)->default_value(defaults.after_prefill_steps),
       "in passes, decodes timed one by one after a prefill chunk, each pass (0: none)")
      ("drift-window", po::value<int32_t>(&profile.drift_window)->default_value(defaults.drift_window),
       "in passes, the measured runs (with each) whose times over their rows' medians say the "
       "host's speed around it, divided out (0: none)")
      ("max-tokens", po::value<int32_t>(&profile.max_tokens)->default_value(0),
       "longest prefill chunk (0: scheduler.max_num_batched_tokens)")
      ("max-batch", po::value<int32_t>(&profile.max_batch)->default_value(0),
       "largest decode batch (0: scheduler.max_num_seqs)")
      ("max-context", po::value<int32_t>(&profile.max_context)->default_value(0),
       "longest context (0: the one the engine serves)")
      ("contiguous", "each step's repeats back to back (default: in passes over the grid)")
      ("interleave-blocks", "lay each step's sequences' KV blocks out interleaved, block after block, as "
       "sequences that grow together get them while serving (default: each sequence's in a row)")
      ("max-spread", po::value<double>(&max_spread),
       "exit 1 (every profile still written) when a profile's whole steps moved by a median "
       "above this percent within their rows: a script's stop on a host too noisy to fit")
      ("no-progress", "never draw the progress line");
  std::vector<std::string> experiment_paths;
  po::variables_map vm;
  if (auto exit = ParseExperimentsCommandLine("profile", args, options, kProfileHelp, vm, experiment_paths,
                                              kMaxProfileExperiments)) {
    return *exit;
  }
  // Every option, every experiment and every output's place are checked before anything
  // is measured.
  if (Status checked = CheckProfileOptions(profile); !checked.ok()) return Report(checked);
  if (vm.count("max-spread") && !(max_spread >= 0 && max_spread <= 1000)) {
    return Report(InvalidArgument("--max-spread " + FormatDouble(max_spread) + ": must be in [0, 1000] percent"));
  }
  profile.interleave = vm.count("contiguous") == 0;
  profile.interleave_blocks = vm.count("interleave-blocks") > 0;
  if (!outs.empty() && outs.size() != experiment_paths.size()) {
    return Report(InvalidArgument("--out given " + std::to_string(outs.size()) + " times for " +
                                  std::to_string(experiment_paths.size()) +
                                  " experiments: one per experiment, in their order, or none"));
  }
  std::vector<ExperimentConfig> configs;
  for (const std::string& experiment : experiment_paths) {
    auto config = LoadExperiment(experiment, sets);
    if (!config.ok()) return Report(config.status());
    if (outs.size() < experiment_paths.size()) outs.push_back("results/" + config->name + "-profile.csv");
    configs.push_back(*std::move(config));
  }
  // Each profile's folder and stream; two profiles to one file would lose one (places
  // told apart by their absolute form, symbolic links resolved where they exist).
  auto place = [](const fs::path& p) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return ec ? fs::absolute(p, ec).lexically_normal() : resolved;
  };
  std::vector<std::unique_ptr<OutputDir>> folders;
  std::vector<fs::path> places;
  std::vector<std::ostream*> csvs;
  for (size_t i = 0; i < outs.size(); ++i) {
    const fs::path path = fs::path(outs[i]).lexically_normal();
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    places.push_back(place(dir) / path.filename());
    for (size_t j = 0; j < i; ++j) {
      if (places[j] == places[i]) {
        return Report(InvalidArgument("--out " + outs[i] + ": the profile of both " + experiment_paths[j] +
                                      " and " + experiment_paths[i] + " (give each its own --out)"));
      }
    }
    if (Status places = CheckOutputPlaces(dir.string(), {path.filename().string()}, experiment_paths);
        !places.ok()) {
      return Report(places);
    }
    auto folder = OutputDir::Open(dir.string());
    if (!folder.ok()) return Report(folder.status());
    auto csv = (*folder)->Stream(path.filename().string());
    if (!csv.ok()) return Report(csv.status());
    csvs.push_back(*csv);
    folders.push_back(std::move(*folder));
  }
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  if (progress) {
    // Redrawn at each whole percent: a decode's run takes a millisecond or two.
    profile.on_progress = [shown = int64_t{-1}](int64_t done, int64_t total) mutable {
      const int64_t percent = 100 * done / std::max<int64_t>(total, 1);
      if (percent == shown && done != total) return;
      shown = percent;
      std::fprintf(stderr, "\r  profile: %3lld%% of %lld measured runs ", static_cast<long long>(percent),
                   static_cast<long long>(total));
      if (done == total) std::fputs("\r\033[K", stderr);
    };
  }
  ProfileDrift drift;
  auto profiles = ProfileEngines(configs, profile, &drift);
  if (!profiles.ok()) return Report(profiles.status());
  if (drift.window > 0) {
    std::printf("the host's speed around each measured run (its neighbours' times over their rows' medians, "
                "--drift-window %d): p10 %.3f, median %.3f, p90 %.3f; divided out of every row\n",
                drift.window, drift.p10, drift.p50, drift.p90);
  }
  std::vector<std::string> too_noisy;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::vector<ProfileRow>& rows = (*profiles)[i];
    *csvs[i] << ProfileCsvHeader();
    for (const ProfileRow& r : rows) WriteProfileRow(*csvs[i], r);
    if (Status written = folders[i]->Commit(); !written.ok()) return Report(written);
    std::printf("%zu measurements of %s on %s\nprofile: %s\n", rows.size(), configs[i].model.name.c_str(),
                rows.empty() ? "?" : rows.front().device.c_str(), outs[i].c_str());
    if (const ProfileSpread spread = SpreadOf(rows); spread.rows > 0) {
      std::printf("  whole steps' p10-p90 spread: median %.1f%%, p90 %.1f%% of a row's median",
                  spread.median_pct, spread.p90_pct);
      if (i < drift.before.size() && drift.before[i].rows > 0) {
        std::printf(" (%.1f%% and %.1f%% with the host's drift)", drift.before[i].median_pct,
                    drift.before[i].p90_pct);
      }
      std::printf("\n");
      if (spread.median_pct > kNoisyProfileSpreadPct) {
        std::fprintf(stderr,
                     "servelab profile: note: %s: the host moved during the profile (a median spread "
                     "above %.0f%%); a fit of it carries that: profile again on a quiet host\n",
                     Printable(outs[i]).c_str(), kNoisyProfileSpreadPct);
      }
      if (max_spread >= 0 && spread.median_pct > max_spread) {
        char said[64];
        std::snprintf(said, sizeof said, " (%.1f%%)", spread.median_pct);
        too_noisy.push_back(outs[i] + said);
      }
    }
  }
  if (!too_noisy.empty()) {
    std::fprintf(stderr,
                 "servelab profile: the whole steps moved by a median above --max-spread %.1f%% in %s: "
                 "the host is too noisy to fit; the profiles are written, profile again later\n",
                 max_spread, Printable(Join(too_noisy, ", ")).c_str());
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace servelab
