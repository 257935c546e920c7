// An interrupted sweep or plan, started again, skips what is already complete in its
// folder and ends with the same files as an uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::Differences;
using testing::ReadFile;
using testing::Tree;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kGrid = R"(name: resume_grid
seed: 3
model: llama-2-7b
hardware: {gpu: a100-80gb}
workload:
  num_requests: 1500
  arrival: {process: poisson, rate: 15}
  input_tokens: {dist: uniform, min: 20, max: 1500}
  output_tokens: {dist: uniform, min: 5, max: 300}
slo: {ttft_ms: 800, tpot_ms: 60}
plan: {min_rate: 1, max_rate: 300, tolerance: 0.05}
sweep:  # the fastest point first, the slowest last: most of the work follows the first
  hardware.gpu: [h100-80gb, a100-80gb]
  scheduler.max_num_seqs: [256, 64, 16]
)";

class ResumeTest : public testing::CliFixture {
 protected:
  // Starts `servelab <args>` in the background (at the lowest priority, so that the
  // watcher wins on a busy machine), waits until `marker` exists (or the command ends),
  // and kills it with SIGKILL: no chance to clean up. (One shell does it all and reaps
  // the process.)
  void KillWhen(const std::string& args, const fs::path& marker) {
    const std::string script = "nice -n 19 " + std::string(SERVELAB_BINARY) + " " + args +
                               " >/dev/null 2>&1 </dev/null & p=$!; while [ ! -e \"" +
                               marker.string() + "\" ] && kill -0 $p 2>/dev/null; do sleep 0.005; "
                               "done; kill -9 $p 2>/dev/null; wait $p";
    // Single quotes: $p and $! are the inner shell's.
    std::system(("sh -c '" + script + "'").c_str());
  }
};

TEST_F(ResumeTest, AKilledSweepResumesToTheSameFiles) {
  const fs::path exp = Write("grid.yaml", kGrid);
  const std::string args = "sweep " + exp.string() + " -j 1 --no-progress --replicates 2";
  const fs::path out = dir_ / "out";
  ASSERT_EQ(Run(args + " --out " + out.string()).exit_code, 0);
  const auto uninterrupted = Tree(out);
  fs::remove_all(out);

  KillWhen(args + " --out " + out.string(), out / "gpu-h100-80gb_max_num_seqs-256" / "config.resolved.yaml");
  const CliResult resumed = Run(args + " --out " + out.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("already complete"));
  EXPECT_THAT(resumed.err, Not(HasSubstr(" 12 runs already complete")));  // it was cut short
  EXPECT_THAT(Differences(Tree(out), uninterrupted), ::testing::IsEmpty());

  // A changed experiment is not the same run: every point runs again, to other results.
  const CliResult changed = Run(args + " --out " + out.string() + " --set workload.arrival.rate=16");
  ASSERT_EQ(changed.exit_code, 0);
  EXPECT_THAT(changed.err, Not(HasSubstr("already complete")));
  EXPECT_NE(ReadFile(out / "sweep.csv"), uninterrupted.at("sweep.csv"));
  // --fresh runs everything again, to the same bytes.
  const CliResult fresh = Run(args + " --out " + out.string() + " --fresh");
  ASSERT_EQ(fresh.exit_code, 0);
  EXPECT_THAT(fresh.err, Not(HasSubstr("already complete")));
  EXPECT_THAT(Differences(Tree(out), uninterrupted), ::testing::IsEmpty());
}

TEST_F(ResumeTest, AKilledPlanResumesToTheSameFiles) {
  const fs::path exp = Write("grid.yaml", kGrid);
  const std::string args = "plan " + exp.string() + " -j 1 --no-progress --no-plots";
  const fs::path out = dir_ / "out";
  ASSERT_EQ(Run(args + " --out " + out.string()).exit_code, 0);
  const auto uninterrupted = Tree(out);
  EXPECT_EQ(uninterrupted.size(), 2u + 6u);  // plan.csv, plan.md, candidates/*.json
  fs::remove_all(out);

  KillWhen(args + " --out " + out.string(), out / "candidates" / "gpu-h100-80gb_max_num_seqs-256.json");
  const CliResult resumed = Run(args + " --out " + out.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("already searched"));
  EXPECT_THAT(resumed.err, Not(HasSubstr("6 of 6 candidates")));  // it was cut short
  EXPECT_THAT(Differences(Tree(out), uninterrupted), ::testing::IsEmpty());
  // A record of another config (here a damaged one) is searched again.
  Write("out/candidates/gpu-h100-80gb_max_num_seqs-16.json", "{\"config\": \"x\"}\n");
  const CliResult again = Run(args + " --out " + out.string());
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("5 of 6 candidates already searched"));
  EXPECT_THAT(Differences(Tree(out), uninterrupted), ::testing::IsEmpty());
}

}  // namespace
}  // namespace servelab
