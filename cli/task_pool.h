#pragma once
// Where a command's independent tasks (sweep points, plan candidates) run: on this
// process's threads, or, when servelab was started by `mpirun -n N` (and built with
// MPI), over the N ranks. Rank 0 then hands out one task at a time to ranks 1 .. N-1 as
// they free up (tasks differ in cost: a dynamic hand-out, not a static split) and
// gathers every result; it runs no task itself, so N ranks give N - 1 workers.
//
// Results are strings (a task's JSON), returned in task order on rank 0, so whatever
// ran where, rank 0 writes the same bytes as a single process. Every rank parses the
// same command line and files, so all reach each Run in the same order; ranks other than
// 0 serve tasks and get nullopt, and write nothing but what their tasks write.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace servelab {

// Starts MPI when this process is one rank of several (mpirun's environment says so)
// and servelab has MPI; otherwise a single process. False (after saying why on stderr)
// when started as one of several ranks by a servelab built without MPI: the caller exits
// 2. Call once, first thing in main; FinishTasks() before exiting.
bool StartTasks(int* argc, char*** argv);
void FinishTasks();

int TaskRank();       // 0 in a single process
int TaskRankCount();  // 1 in a single process
bool HasMpi();        // built with MPI

// Runs fn(i) for every i in [0, n) whose `skip[i]` is false (an empty `skip` skips
// nothing; only rank 0's is read, so a decision taken from files is taken once). A single
// process: on `jobs` threads. Several ranks: over ranks 1 .. N-1, one task at a time each
// (`jobs` is ignored). `on_result(i, result, done)` is called on rank 0, one call at a
// time, as each result arrives (to record it at once). Rank 0 gets the n results in order
// (skipped ones empty); other ranks nullopt.
using TaskResultFn = std::function<void(size_t index, const std::string& result, size_t done)>;
std::optional<std::vector<std::string>> RunTasks(size_t n, int jobs,
                                                 const std::function<std::string(size_t)>& fn,
                                                 const TaskResultFn& on_result = {},
                                                 const std::vector<bool>& skip = {});

}  // namespace servelab
