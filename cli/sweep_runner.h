#pragma once
// Runs the points of a Sweep on worker threads, each into its own result folder.
// Every point is an independent simulation seeded from its own config, so the files are
// the same whatever the number of workers.
#include <functional>
#include <string>
#include <vector>

#include "cli/point_outcome.h"
#include "core/status.h"
#include "driver/sweep_config.h"

namespace servelab {

// The worker count for `--jobs N`: N itself when positive; 0 means every core
// (std::thread::hardware_concurrency(), at least 1).
int ResolveJobs(int jobs);
// `--jobs`: 0 (every core) to kMaxJobs threads, or InvalidArgument naming the flag (a
// million threads would fail to start and abort the run).
inline constexpr int kMaxJobs = 1024;
Status CheckJobs(int jobs);

// Calls fn(i) for every i in [0, n) on min(jobs, n) threads, each i exactly once, handed
// out in order as threads free up (points differ in cost).
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn);

// Prepares every point (the checks only a whole experiment allows: the model fits, the
// policy and workload can be built) on `jobs` threads, before anything runs. Bad input
// names the point; identical messages of several points are reported once.
Status ValidateSweep(const Sweep& sweep, int jobs);

// Runs every point into `dir`/<point.folder>/ (RunToFolder); one outcome per point, in
// grid order. A failed point does not stop the others. A point with config.replicates =
// N > 1 also runs replicates 1 .. N-1 (ReplicateOf) in memory; its outcome then holds
// all N summaries, and a replicate that fails fails its point. Runs are spread over
// `jobs` threads, or over MPI ranks (cli/task_pool.h): then only rank 0 gets the
// outcomes, the others an empty vector.
// With `resume`, runs an earlier, interrupted sweep into `dir` completed are not run
// again: a point whose folder's config.resolved.yaml is what this point writes (the last
// file a run renames into place) keeps its summary.json, and a replicated point whose
// replicates.json (the summaries of replicates 1 .. N-1, written into its folder once
// they all ran) is of that config and holds its seeds keeps those; `resumed` counts
// them. The tables are then byte-identical to an
// uninterrupted sweep's.
// A non-empty `progress_label` redraws "<label>: 7/24 runs done" on stderr (the caller
// checks it is a terminal).
std::vector<PointOutcome> RunSweep(const Sweep& sweep, const std::string& dir, int jobs,
                                   const std::string& progress_label, bool resume,
                                   size_t* resumed = nullptr);

// The whole of `sweep` and `compare` between parsing and writing their tables:
// validates every point (bad input: printed, returns kExitBadInput, nothing ran), opens
// `dir` and checks that none of `tables` (the files written into it afterwards) is a
// folder there, runs every point into `results`, prints each failed point on stderr as
// "servelab <command>: point <folder> failed: <message>". Returns kExitOk, or
// kExitRuntimeError when a point failed (`results` is then still complete).
int ValidateAndRun(const Sweep& sweep, const std::string& dir, int jobs, bool progress,
                   const std::string& command, const std::vector<std::string>& tables, bool resume,
                   std::vector<PointOutcome>& outcomes);

}  // namespace servelab
