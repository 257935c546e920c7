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

std::vector<StatusOr<RunSummary>> RunSweep(const Sweep& sweep, const std::string& dir, int jobs,
                                           const std::string& progress_label,
                                           std::vector<std::vector<RunSummary>>& replicates) {
  const size_t n = sweep.points.size();
  // One task per (point, replicate), replicate 0 of every point first.
  std::vector<std::pair<size_t, int32_t>> tasks;
  for (size_t p = 0; p < n; ++p) tasks.emplace_back(p, 0);
  for (size_t p = 0; p < n; ++p) {
    for (int32_t r = 1; r < sweep.points[p].config.replicates; ++r) tasks.emplace_back(p, r);
  }
  std::vector<StatusOr<RunSummary>> results(n, Internal("not run"));
  std::vector<std::vector<StatusOr<RunSummary>>> runs(n);
  for (size_t p = 0; p < n; ++p) {
    runs[p].assign(static_cast<size_t>(sweep.points[p].config.replicates), Internal("not run"));
  }
  std::mutex mutex;
  size_t done = 0;
  ParallelFor(tasks.size(), jobs, [&](size_t t) {
    const auto [p, r] = tasks[t];
    const SweepPoint& point = sweep.points[p];
    StatusOr<RunSummary> result =
        r == 0 ? RunExperimentToFolder(point.config,
                                       (std::filesystem::path(dir) / point.folder).string(),
                                       /*progress=*/false)
               : RunExperimentInMemory(ReplicateOf(point.config, r));
    std::lock_guard<std::mutex> lock(mutex);
    runs[p][static_cast<size_t>(r)] = std::move(result);
    ++done;
    if (!progress_label.empty()) {
      std::fprintf(stderr, "\r%s: %zu/%zu runs done ", progress_label.c_str(), done, tasks.size());
      if (done == tasks.size()) std::fputs("\r\033[K", stderr);
    }
  });
  replicates.assign(n, {});
  for (size_t p = 0; p < n; ++p) {
    results[p] = runs[p][0];
    if (runs[p].size() < 2) continue;
    for (const auto& run : runs[p]) {
      if (!run.ok()) {
        results[p] = run.status();
        break;
      }
    }
    if (!results[p].ok()) continue;
    for (auto& run : runs[p]) replicates[p].push_back(std::move(run).value());
  }
  return results;
}

int ValidateAndRun(const Sweep& sweep, const std::string& dir, int jobs, bool progress,
                   const std::string& command, std::vector<StatusOr<RunSummary>>& results,
                   std::vector<std::vector<RunSummary>>& replicates) {
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
  results = RunSweep(sweep, dir, jobs, progress ? command : std::string(), replicates);
  int exit_code = kExitOk;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    std::fprintf(stderr, "servelab %s: point %s failed: %s\n", command.c_str(),
                 sweep.points[i].folder.c_str(), results[i].status().message().c_str());
    exit_code = kExitRuntimeError;
  }
  return exit_code;
}

}  // namespace servelab
