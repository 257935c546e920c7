#include "cli/task_pool.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cli/sweep_runner.h"

#if SERVELAB_HAS_MPI
#include <mpi.h>
#endif

namespace servelab {
namespace {

int rank = 0;
int ranks = 1;
bool mpi_started = false;

// mpirun (Open MPI, MPICH) and srun (Slurm) tell each rank how many there are.
bool LaunchedAsRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 1) return true;
  }
  return false;
}

#if SERVELAB_HAS_MPI
enum Tag : int { kRequest = 1, kTask = 2, kStop = 3, kResult = 4 };

std::string ReceiveBytes(const MPI_Status& probed) {
  int size = 0;
  MPI_Get_count(&probed, MPI_BYTE, &size);
  std::string bytes(static_cast<size_t>(size), '\0');
  MPI_Recv(bytes.data(), size, MPI_BYTE, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return bytes;
}

std::vector<std::string> Lead(const std::vector<size_t>& todo, size_t n, const TaskResultFn& on_result) {
  std::vector<std::string> results(n);
  size_t next = 0, done = 0;
  int stopped = 0;
  while (stopped < ranks - 1) {
    MPI_Status probed;
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &probed);
    const std::string message = ReceiveBytes(probed);
    if (probed.MPI_TAG == kResult) {
      uint64_t index = 0;
      std::memcpy(&index, message.data(), sizeof index);
      results[index] = message.substr(sizeof index);
      ++done;
      if (on_result) on_result(index, results[index], done);
    }
    if (next < todo.size()) {
      const uint64_t index = todo[next++];
      MPI_Send(&index, sizeof index, MPI_BYTE, probed.MPI_SOURCE, kTask, MPI_COMM_WORLD);
    } else {
      MPI_Send(nullptr, 0, MPI_BYTE, probed.MPI_SOURCE, kStop, MPI_COMM_WORLD);
      ++stopped;
    }
  }
  return results;
}

void Serve(const std::function<std::string(size_t)>& fn) {
  MPI_Send(nullptr, 0, MPI_BYTE, 0, kRequest, MPI_COMM_WORLD);
  while (true) {
    MPI_Status probed;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &probed);
    const std::string message = ReceiveBytes(probed);
    if (probed.MPI_TAG == kStop) return;
    uint64_t index = 0;
    std::memcpy(&index, message.data(), sizeof index);
    std::string reply(sizeof index, '\0');
    std::memcpy(reply.data(), &index, sizeof index);
    reply += fn(static_cast<size_t>(index));
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, 0, kResult, MPI_COMM_WORLD);
  }
}
#endif

}  // namespace

bool StartTasks(int* argc, char*** argv) {
#if SERVELAB_HAS_MPI
  if (!LaunchedAsRanks()) return true;
  MPI_Init(argc, argv);
  mpi_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank != 0) {
    // One voice: rank 0 prints (every rank parses the same input and would say the same).
    if (std::freopen("/dev/null", "w", stdout) == nullptr ||
        std::freopen("/dev/null", "w", stderr) == nullptr) {
      std::perror("servelab: /dev/null");
    }
  }
  return true;
#else
  (void)argc;
  (void)argv;
  if (LaunchedAsRanks()) {
    // Every rank would run the whole command into the same folders.
    std::fputs("servelab: started as one of several MPI ranks, but this servelab was built "
               "without MPI; install libopenmpi-dev and openmpi-bin, then rebuild "
               "(scripts/build.sh)\n", stderr);
    return false;
  }
  return true;
#endif
}

void FinishTasks() {
#if SERVELAB_HAS_MPI
  if (mpi_started) MPI_Finalize();
#endif
}

int TaskRank() { return rank; }
int TaskRankCount() { return ranks; }
bool HasMpi() { return SERVELAB_HAS_MPI != 0; }

std::optional<std::vector<std::string>> RunTasks(size_t n, int jobs,
                                                 const std::function<std::string(size_t)>& fn,
                                                 const TaskResultFn& on_result,
                                                 const std::vector<bool>& skip) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < n; ++i) {
    if (skip.empty() || !skip[i]) todo.push_back(i);
  }
#if SERVELAB_HAS_MPI
  if (ranks > 1) {
    if (rank == 0) return Lead(todo, n, on_result);
    Serve(fn);
    return std::nullopt;
  }
#endif
  std::vector<std::string> results(n);
  std::mutex mutex;
  size_t done = 0;
  ParallelFor(todo.size(), jobs, [&](size_t k) {
    const size_t i = todo[k];
    std::string result = fn(i);
    std::lock_guard<std::mutex> lock(mutex);
    results[i] = std::move(result);
    ++done;
    if (on_result) on_result(i, results[i], done);
  });
  return results;
}

}  // namespace servelab
