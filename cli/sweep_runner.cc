#include "cli/sweep_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/run_experiment.h"
#include "cli/task_pool.h"
#include "driver/experiment.h"

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

std::vector<PointOutcome> RunSweep(const Sweep& sweep, const std::string& dir, int jobs,
                                   const std::string& progress_label) {
  const size_t n = sweep.points.size();
  // One task per (point, replicate), replicate 0 of every point first.
  std::vector<std::pair<size_t, int32_t>> tasks;
  for (size_t p = 0; p < n; ++p) tasks.emplace_back(p, 0);
  for (size_t p = 0; p < n; ++p) {
    for (int32_t r = 1; r < sweep.points[p].config.replicates; ++r) tasks.emplace_back(p, r);
  }
  auto run = [&](size_t t) {
    const auto [p, r] = tasks[t];
    const SweepPoint& point = sweep.points[p];
    const StatusOr<RunSummary> result =
        r == 0 ? RunExperimentToFolder(point.config,
                                       (std::filesystem::path(dir) / point.folder).string(),
                                       /*progress=*/false)
               : RunExperimentInMemory(ReplicateOf(point.config, r));
    return OutcomeOf({result}).ToJson().dump();
  };
  auto progress = [&](size_t done) {
    if (progress_label.empty()) return;
    std::fprintf(stderr, "\r%s: %zu/%zu runs done ", progress_label.c_str(), done, tasks.size());
    if (done == tasks.size()) std::fputs("\r\033[K", stderr);
  };
  auto results = RunTasks(tasks.size(), jobs, run, progress);
  if (!results) return {};  // another rank gathers
  // Back to points: replicate 0's outcome, then, with replicates, every summary in order.
  std::vector<PointOutcome> outcomes(n);
  std::vector<std::vector<PointOutcome>> runs(n);
  for (size_t t = 0; t < tasks.size(); ++t) {
    runs[tasks[t].first].push_back(
        PointOutcome::FromJson(nlohmann::ordered_json::parse((*results)[t])));
  }
  for (size_t p = 0; p < n; ++p) {
    outcomes[p] = runs[p][0];
    if (runs[p].size() < 2 || !outcomes[p].ok()) continue;
    for (const PointOutcome& replicate : runs[p]) {
      if (!replicate.ok()) {
        outcomes[p].status = replicate.status;
        outcomes[p].summary = nullptr;
        outcomes[p].replicates.clear();
        break;
      }
      outcomes[p].replicates.push_back(replicate.summary);
    }
  }
  return outcomes;
}

int ValidateAndRun(const Sweep& sweep, const std::string& dir, int jobs, bool progress,
                   const std::string& command, std::vector<PointOutcome>& outcomes) {
  auto report = [&command](const Status& status) {
    std::fprintf(stderr, "servelab %s: %s\n", command.c_str(), status.message().c_str());
    return status.IsBadInput() ? kExitBadInput : kExitRuntimeError;
  };
  if (Status valid = ValidateSweep(sweep, jobs); !valid.ok()) return report(valid);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return report(InvalidArgument(dir + ": cannot create output folder: " + ec.message()));
  }
  outcomes = RunSweep(sweep, dir, jobs, progress ? command : std::string());
  int exit_code = kExitOk;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].ok()) continue;
    std::fprintf(stderr, "servelab %s: point %s failed: %s\n", command.c_str(),
                 sweep.points[i].folder.c_str(), outcomes[i].status.message().c_str());
    exit_code = kExitRuntimeError;
  }
  return exit_code;
}

}  // namespace servelab
