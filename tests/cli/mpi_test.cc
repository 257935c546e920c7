// `mpirun -n 2 servelab sweep|plan ...` gives byte-identical files to one process with
// --jobs 1 (rank 0 hands the points out and writes the tables). Skipped, saying why,
// when servelab was built without MPI or mpirun is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "cli/task_pool.h"
#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::Differences;
using testing::ReadFile;
using testing::Tree;

constexpr const char* kGrid = R"(name: mpi_grid
seed: 9
model: llama-2-7b
hardware: {gpu: a100-80gb}
workload:
  num_requests: 150
  arrival: {process: poisson, rate: 12}
  input_tokens: {dist: uniform, min: 20, max: 1500}
  output_tokens: {dist: uniform, min: 5, max: 200}
slo: {ttft_ms: 500, tpot_ms: 50}
plan: {min_rate: 1, max_rate: 300, tolerance: 0.05}
sweep:
  hardware.gpu: [a100-80gb, h100-80gb]
  scheduler.max_num_seqs: [16, 64, 256]
)";

class MpiTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (!HasMpi()) GTEST_SKIP() << "servelab was built without MPI (apt-get install libopenmpi-dev)";
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin)";
    }
  }
  // Runs `args` once with --jobs 1 and once under mpirun -n 2, into the same folder (the
  // resolved configs name it), and returns both trees.
  std::pair<std::map<std::string, std::string>, std::map<std::string, std::string>> Both(
      const std::string& args) {
    const fs::path out = dir_ / "out";
    const CliResult one = Run(args + " --out " + out.string() + " -j 1");
    EXPECT_EQ(one.exit_code, 0) << one.err;
    auto single = Tree(out);
    fs::remove_all(out);
    const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe -n 2 " +
                               std::string(SERVELAB_BINARY);
    const std::string command = mpirun + " " + args + " --out " + out.string() + " >" +
                                (dir_ / "mpi.out").string() + " 2>&1 </dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << ReadFile(dir_ / "mpi.out");
    return {single, Tree(out)};
  }
};

TEST_F(MpiTest, SweepOverTwoRanksWritesTheSameFiles) {
  const fs::path exp = Write("grid.yaml", kGrid);
  auto [single, ranks] = Both("sweep " + exp.string() + " --no-progress --replicates 2");
  // Six point folders of seven files and replicates.json, and sweep.csv.
  EXPECT_EQ(single.size(), 6u * 8u + 1u);
  EXPECT_THAT(Differences(single, ranks), ::testing::IsEmpty());
}

TEST_F(MpiTest, PlanOverTwoRanksWritesTheSameFiles) {
  const fs::path exp = Write("grid.yaml", kGrid);
  auto [single, ranks] = Both("plan " + exp.string() + " --no-plots --no-progress --target-rate 40");
  EXPECT_EQ(single.size(), 2u + 6u);  // plan.csv, plan.md, candidates/*.json
  EXPECT_THAT(Differences(single, ranks), ::testing::IsEmpty());
}

}  // namespace
}  // namespace servelab
