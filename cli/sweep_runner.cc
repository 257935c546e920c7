#include "cli/sweep_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/run_experiment.h"
#include "cli/task_pool.h"
#include "core/read_file.h"
#include "core/text.h"
#include "driver/config_yaml.h"
#include "driver/experiment.h"
#include "driver/output_dir.h"

namespace servelab {

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  const size_t threads = std::min(n, static_cast<size_t>(std::max(jobs, 1)));
  if (threads <= 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

Status CheckJobs(int jobs) {
  if (jobs >= 0 && jobs <= kMaxJobs) return Status::Ok();
  return InvalidArgument("--jobs " + std::to_string(jobs) + ": must be in [0, " + std::to_string(kMaxJobs) +
                         "] (0: every core)");
}

int ResolveJobs(int jobs) {
  if (jobs > 0) return jobs;
  return std::max(1u, std::thread::hardware_concurrency());
}

Status ValidateSweep(const Sweep& sweep, int jobs) {
  std::vector<Status> results(sweep.points.size());
  ParallelFor(sweep.points.size(), jobs, [&](size_t i) {
    results[i] = CheckExperiment(sweep.points[i].config);
  });
  std::vector<std::pair<std::string, std::string>> failures;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    // A runtime failure while preparing is still reported before anything runs.
    if (!results[i].IsBadInput()) return results[i];
    failures.emplace_back(sweep.points[i].folder, results[i].message());
  }
  if (failures.empty()) return Status::Ok();
  return CombinePointErrors(failures, sweep.points.size());
}

namespace {

namespace fs = std::filesystem;

// A file's text, or nullopt when it is not a regular file that reads.
std::optional<std::string> TextOf(const fs::path& path) {
  auto text = ReadRegularFile(path.string(), kMaxConfigFileBytes, "result file");
  if (!text.ok()) return std::nullopt;
  return std::move(text).value();
}

std::optional<nlohmann::ordered_json> JsonOf(const fs::path& path) {
  auto text = TextOf(path);
  if (!text) return std::nullopt;
  auto json = nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

// Replicate 0 of a point is complete in `folder` when its config.resolved.yaml is
// `expected`, the one this point's run writes (a run renames it into place last, after
// every other file), and its summary.json reads.
std::optional<nlohmann::ordered_json> CompletedRun(const std::string& expected,
                                                   const fs::path& folder) {
  const auto written = TextOf(folder / "config.resolved.yaml");
  if (!written || *written != expected) return std::nullopt;
  auto summary = JsonOf(folder / "summary.json");
  if (!summary || !summary->is_object()) return std::nullopt;
  return summary;
}

// replicates.json, {"config": replicate 0's resolved config, "seeds": [...],
// "summaries": [...]}: the summaries of replicates 1 .. N-1 (replicate 0's is the
// folder's summary.json), written once all of a point's replicates ran. Complete when it
// is of this config and holds this point's seeds.
constexpr const char* kReplicatesFile = "replicates.json";

std::optional<std::vector<nlohmann::ordered_json>> CompletedReplicates(
    const std::string& expected, const SweepPoint& point, const fs::path& folder) {
  auto json = JsonOf(folder / kReplicatesFile);
  if (!json || !json->is_object() || !json->contains("config") || !json->contains("seeds") ||
      !json->contains("summaries") || (*json)["config"] != expected) {
    return std::nullopt;
  }
  const auto& seeds = (*json)["seeds"];
  const auto& summaries = (*json)["summaries"];
  const auto n = static_cast<size_t>(point.config.replicates) - 1;
  if (!seeds.is_array() || !summaries.is_array() || seeds.size() != n || summaries.size() != n) {
    return std::nullopt;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto r = static_cast<int32_t>(i + 1);
    if (!seeds[i].is_number_integer() ||
        seeds[i].get<int64_t>() != ReplicateSeed(point.config.seed, r)) {
      return std::nullopt;
    }
  }
  return std::vector<nlohmann::ordered_json>(summaries.begin(), summaries.end());
}

Status WriteReplicates(const SweepPoint& point, const fs::path& folder,
                       const std::vector<nlohmann::ordered_json>& summaries) {
  auto config = ResolvedConfigOf(point.config, folder.string());
  if (!config.ok()) return config.status();
  nlohmann::ordered_json json;
  json["config"] = *config;
  json["seeds"] = nlohmann::ordered_json::array();
  for (int32_t r = 1; r < point.config.replicates; ++r) {
    json["seeds"].push_back(ReplicateSeed(point.config.seed, r));
  }
  json["summaries"] = std::vector<nlohmann::ordered_json>(summaries.begin() + 1, summaries.end());
  auto out = OutputDir::Open(folder.string());
  if (!out.ok()) return out.status();
  SERVELAB_RETURN_IF_ERROR((*out)->WriteFile(kReplicatesFile, json.dump(1) + "\n"));
  return (*out)->Commit();
}

}  // namespace

std::vector<PointOutcome> RunSweep(const Sweep& sweep, const std::string& dir, int jobs,
                                   const std::string& progress_label, bool resume,
                                   size_t* resumed) {
  const size_t n = sweep.points.size();
  // One task per (point, replicate), replicate 0 of every point first.
  std::vector<std::pair<size_t, int32_t>> tasks;
  for (size_t p = 0; p < n; ++p) tasks.emplace_back(p, 0);
  for (size_t p = 0; p < n; ++p) {
    for (int32_t r = 1; r < sweep.points[p].config.replicates; ++r) tasks.emplace_back(p, r);
  }
  auto folder = [&](size_t p) { return fs::path(dir) / sweep.points[p].folder; };
  // What an earlier, interrupted sweep into `dir` already finished (rank 0 decides).
  std::vector<bool> skip(tasks.size(), false);
  std::vector<std::optional<nlohmann::ordered_json>> done_run(n);
  std::vector<std::optional<std::vector<nlohmann::ordered_json>>> done_replicates(n);
  if (resume && TaskRank() == 0) {
    for (size_t t = 0; t < tasks.size(); ++t) {
      const auto [p, r] = tasks[t];
      if (r == 0) {
        auto expected = ResolvedConfigOf(sweep.points[p].config, folder(p).string());
        if (expected.ok()) {
          done_run[p] = CompletedRun(*expected, folder(p));
          if (sweep.points[p].config.replicates > 1) {
            done_replicates[p] = CompletedReplicates(*expected, sweep.points[p], folder(p));
          }
        }
      }
      skip[t] = r == 0 ? done_run[p].has_value() : done_replicates[p].has_value();
    }
  }
  auto run = [&](size_t t) {
    const auto [p, r] = tasks[t];
    const SweepPoint& point = sweep.points[p];
    const StatusOr<RunSummary> result =
        r == 0 ? RunExperimentToFolder(point.config, folder(p).string(), /*progress=*/false)
               : RunExperimentInMemory(ReplicateOf(point.config, r));
    return OutcomeOf({result}).ToJson().dump();
  };
  const size_t todo = static_cast<size_t>(std::count(skip.begin(), skip.end(), false));
  auto progress = [&](size_t, const std::string&, size_t done) {
    if (progress_label.empty()) return;
    std::fprintf(stderr, "\r%s: %zu/%zu runs done ", progress_label.c_str(), done, todo);
    if (done == todo) std::fputs("\r\033[K", stderr);
  };
  auto results = RunTasks(tasks.size(), jobs, run, progress, skip);
  if (!results) return {};  // another rank gathers
  if (resumed != nullptr) *resumed = tasks.size() - todo;
  // Back to points: replicate 0's outcome, then, with replicates, every summary in order.
  std::vector<std::vector<PointOutcome>> runs(n);
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto [p, r] = tasks[t];
    PointOutcome o;
    if (!skip[t]) {
      o = PointOutcome::FromJson(nlohmann::ordered_json::parse((*results)[t]));
    } else {
      o.status = Status::Ok();
      o.summary = r == 0 ? *done_run[p] : (*done_replicates[p])[static_cast<size_t>(r - 1)];
    }
    runs[p].push_back(std::move(o));
  }
  std::vector<PointOutcome> outcomes(n);
  for (size_t p = 0; p < n; ++p) {
    outcomes[p] = runs[p][0];
    if (runs[p].size() < 2 || !outcomes[p].ok()) continue;
    if (done_replicates[p]) {
      outcomes[p].replicates = {outcomes[p].summary};
      outcomes[p].replicates.insert(outcomes[p].replicates.end(), done_replicates[p]->begin(),
                                    done_replicates[p]->end());
      continue;
    }
    for (const PointOutcome& replicate : runs[p]) {
      if (!replicate.ok()) {
        outcomes[p].status = replicate.status;
        outcomes[p].summary = nullptr;
        outcomes[p].replicates.clear();
        break;
      }
      outcomes[p].replicates.push_back(replicate.summary);
    }
    // Recorded at once, so that a sweep interrupted later resumes past them.
    if (outcomes[p].ok()) {
      if (Status w = WriteReplicates(sweep.points[p], folder(p), outcomes[p].replicates); !w.ok()) {
        outcomes[p].status = w;
        outcomes[p].replicates.clear();
      }
    }
  }
  return outcomes;
}

int ValidateAndRun(const Sweep& sweep, const std::string& dir, int jobs, bool progress,
                   const std::string& command, const std::vector<std::string>& tables, bool resume,
                   std::vector<PointOutcome>& outcomes) {
  auto report = [&command](const Status& status) { return ReportFailure(command, status); };
  if (Status valid = ValidateSweep(sweep, jobs); !valid.ok()) return report(valid);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return report(InvalidArgument(dir + ": cannot create output folder: " + ec.message()));
  }
  // Found now, not after every point has run.
  if (Status places = CheckOutputPlaces(dir, tables); !places.ok()) return report(places);
  size_t resumed = 0;
  outcomes = RunSweep(sweep, dir, jobs, progress ? command : std::string(), resume, &resumed);
  if (resumed > 0) {
    std::fprintf(stderr, "servelab %s: note: %zu runs already complete in %s were not run again "
                 "(--fresh runs every point)\n", command.c_str(), resumed, Printable(dir).c_str());
  }
  int exit_code = kExitOk;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].ok()) continue;
    std::fprintf(stderr, "servelab %s: point %s failed: %s\n", command.c_str(),
                 Printable(sweep.points[i].folder).c_str(), Printable(outcomes[i].status.message()).c_str());
    exit_code = kExitRuntimeError;
  }
  return exit_code;
}

}  // namespace servelab
