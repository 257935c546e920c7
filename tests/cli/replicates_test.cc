// `--replicates` / `replicates:` on run, sweep, compare and plan: the files gain means
// and 95% intervals, the same whatever --jobs, and replicate 0 is the plain run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ReadFile;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kExp = R"(name: reps
seed: 4
model: llama-2-7b
hardware: {gpu: a100-80gb}
workload:
  num_requests: 200
  arrival: {process: poisson, rate: 20}
  input_tokens: {dist: uniform, min: 50, max: 2000}
  output_tokens: {dist: uniform, min: 10, max: 300}
slo: {ttft_ms: 400, tpot_ms: 40}
plan: {min_rate: 1, max_rate: 200, tolerance: 0.05}
)";

class ReplicatesCliTest : public testing::CliFixture {};

TEST_F(ReplicatesCliTest, RunKeepsReplicateZerosFilesAndAddsTheTables) {
  const fs::path exp = Write("e.yaml", kExp);
  ASSERT_EQ(Run("run " + exp.string() + " --out " + (dir_ / "one").string()).exit_code, 0);
  const CliResult three = Run("run " + exp.string() + " --out " + (dir_ / "three").string() +
                              " --replicates 3");
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(ReadFile(dir_ / "one" / "requests.csv"), ReadFile(dir_ / "three" / "requests.csv"));
  const std::string csv = ReadFile(dir_ / "three" / "replicates.csv");
  EXPECT_THAT(csv, HasSubstr("seed,folder,status,finished"));
  EXPECT_THAT(csv, HasSubstr("\n4,replicate-0,ok,"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  EXPECT_THAT(three.out, HasSubstr("Over 3 replicates"));
  EXPECT_THAT(ReadFile(dir_ / "three" / "replicates.md"), HasSubstr("| E2E mean (s) |"));
  // Run again with one replicate: the earlier tables no longer describe the folder.
  ASSERT_EQ(Run("run " + exp.string() + " --out " + (dir_ / "three").string()).exit_code, 0);
  EXPECT_FALSE(fs::exists(dir_ / "three" / "replicates.csv"));
  EXPECT_FALSE(fs::exists(dir_ / "three" / "replicates.md"));
  // A folder where a table goes: found before any replicate runs.
  fs::create_directories(dir_ / "four" / "replicates.md");
  const CliResult four = Run("run " + exp.string() + " --out " + (dir_ / "four").string() + " --replicates 3");
  EXPECT_EQ(four.exit_code, 2);
  EXPECT_THAT(four.err, HasSubstr("replicates.md: is a folder"));
  EXPECT_FALSE(fs::exists(dir_ / "four" / "requests.csv"));
}

TEST_F(ReplicatesCliTest, CompareReportsIntervalsWhateverTheJobs) {
  const fs::path exp = Write("e.yaml", kExp);
  const std::string args = "compare " + exp.string() + " --policies fcfs,sjf --replicates 4 --no-plots";
  const CliResult a = Run(args + " -j 1 --out " + (dir_ / "a").string());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliResult b = Run(args + " -j 2 --out " + (dir_ / "b").string());
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(ReadFile(dir_ / "a" / "compare.csv"), ReadFile(dir_ / "b" / "compare.csv"));
  EXPECT_EQ(ReadFile(dir_ / "a" / "compare.md"), ReadFile(dir_ / "b" / "compare.md"));
  const std::string csv = ReadFile(dir_ / "a" / "compare.csv");
  EXPECT_THAT(csv, HasSubstr("status,replicates,finished,finished_ci95,"));
  EXPECT_THAT(a.out, HasSubstr("| vs fcfs | output tok/s |"));
  EXPECT_THAT(a.out, HasSubstr("| sjf |"));
  // One replicate: the columns and the paired table are as they always were.
  const CliResult one = Run("compare " + exp.string() + " --policies fcfs,sjf --no-plots --out " +
                            (dir_ / "c").string());
  ASSERT_EQ(one.exit_code, 0);
  EXPECT_THAT(ReadFile(dir_ / "c" / "compare.csv"), Not(HasSubstr("_ci95")));
  EXPECT_THAT(one.out, Not(HasSubstr("vs fcfs")));
}

TEST_F(ReplicatesCliTest, PlanGivesTheMaxRateItsInterval) {
  const fs::path exp = Write("e.yaml", kExp);
  const CliResult r = Run("plan " + exp.string() + " --replicates 3 --no-plots --out " +
                          (dir_ / "p").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = ReadFile(dir_ / "p" / "plan.csv");
  EXPECT_THAT(csv, HasSubstr("replicates,max_rate,max_rate_ci_low,max_rate_ci_high"));
  EXPECT_THAT(csv, HasSubstr("\nreps,ok,1,3,"));
  EXPECT_THAT(r.out, HasSubstr(" ± "));
}

}  // namespace
}  // namespace servelab
