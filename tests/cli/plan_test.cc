// `servelab plan`: the files it writes, independent of --jobs, and its bad input.
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

// Two GPUs x two batch limits, 300 requests a probe.
constexpr const char* kPlan = R"(name: small_plan
seed: 2
model: llama-2-7b
hardware: {gpu: a100-80gb}
workload:
  num_requests: 300
  arrival: {process: poisson, rate: 1}
  input_tokens: {dist: uniform, min: 100, max: 900}
  output_tokens: {dist: uniform, min: 50, max: 150}
slo: {ttft_ms: 500, tpot_ms: 50}
plan: {min_rate: 1, max_rate: 500, tolerance: 0.02}
sweep:
  hardware.gpu: [a100-80gb, h100-80gb]
  scheduler.max_num_seqs: [32, 128]
)";

class PlanCliTest : public testing::CliFixture {};

TEST_F(PlanCliTest, WritesOneRowPerCandidateWhateverTheJobs) {
  const fs::path plan = Write("plan.yaml", kPlan);
  const CliResult one = Run("plan " + plan.string() + " --out " + (dir_ / "a").string() +
                            " -j 1 --no-plots --target-rate 30");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliResult two = Run("plan " + plan.string() + " --out " + (dir_ / "b").string() +
                            " -j 2 --no-plots --target-rate 30");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const std::string csv = ReadFile(dir_ / "a" / "plan.csv");
  EXPECT_EQ(csv, ReadFile(dir_ / "b" / "plan.csv"));
  EXPECT_EQ(ReadFile(dir_ / "a" / "plan.md"), ReadFile(dir_ / "b" / "plan.md"));
  EXPECT_THAT(csv, HasSubstr("hardware.gpu,scheduler.max_num_seqs,candidate,status,gpus,replicates,max_rate"));
  EXPECT_THAT(csv, HasSubstr("a100-80gb,32,gpu-a100-80gb_max_num_seqs-32,ok,1,1,"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_THAT(one.out, HasSubstr("For a peak of 30.00 req/s: "));
  EXPECT_THAT(one.out, HasSubstr("a month"));
}

// One candidate (no sweep): its record is named after the experiment as a sweep point's
// folder is, so a name with slashes stays inside DIR/candidates.
TEST_F(PlanCliTest, ASingleCandidatesRecordStaysInItsFolder) {
  std::string single = kPlan;
  single = single.substr(0, single.find("sweep:"));
  single.replace(single.find("name: small_plan"), 16, "name: ../escape");
  const fs::path plan = Write("single.yaml", single);
  const CliResult r = Run("plan " + plan.string() + " --out " + (dir_ / "p").string() + " --no-plots");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "p" / "candidates" / "..-escape.json"));
  EXPECT_FALSE(fs::exists(dir_ / "p" / "escape.json"));
}

TEST_F(PlanCliTest, BadInputExitsTwo) {
  const fs::path plan = Write("plan.yaml", kPlan);
  // Every candidate fails the memory check: said so, nothing written.
  const CliResult nofit = Run("plan " + plan.string() + " --out " + (dir_ / "x").string() +
                              " --set model=llama-2-70b --no-plots");
  EXPECT_EQ(nofit.exit_code, 2);
  EXPECT_THAT(nofit.err, HasSubstr("no candidate can run"));
  EXPECT_THAT(nofit.err, HasSubstr("does not fit"));
  EXPECT_FALSE(fs::exists(dir_ / "x")) << "bad input writes nothing";
  // Where the plan goes, found before any search: a folder in plan.md's place, a file in
  // the output folder's or the searched candidates'.
  fs::create_directories(dir_ / "y" / "plan.md");
  const CliResult md = Run("plan " + plan.string() + " --out " + (dir_ / "y").string() + " --no-plots");
  EXPECT_EQ(md.exit_code, 2);
  EXPECT_THAT(md.err, HasSubstr("plan.md: is a folder"));
  EXPECT_FALSE(fs::exists(dir_ / "y" / "candidates"));
  Write("file", "not a folder");
  const CliResult under = Run("plan " + plan.string() + " --out " + (dir_ / "file" / "z").string() + " --no-plots");
  EXPECT_EQ(under.exit_code, 2);
  EXPECT_THAT(under.err, HasSubstr("file: is a file, where the output folder"));
  fs::create_directories(dir_ / "w");
  Write("w/candidates", "not a folder");
  const CliResult searched = Run("plan " + plan.string() + " --out " + (dir_ / "w").string() + " --no-plots");
  EXPECT_EQ(searched.exit_code, 2);
  EXPECT_THAT(searched.err, HasSubstr("w/candidates: is a file, where the output folder"));
  // No target to meet.
  const CliResult none = Run("plan " + plan.string() + " --set slo.ttft_ms=0 --set slo.tpot_ms=0");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("a plan needs a target"));
  // The flags are checked as the keys they set.
  const CliResult rate = Run("plan " + plan.string() + " --target-rate -3");
  EXPECT_EQ(rate.exit_code, 2);
  EXPECT_THAT(rate.err, HasSubstr("plan.target_rate: value -3.0 out of range"));
  // A trace has its own times.
  Write("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,20\n");
  const CliResult trace = Run("plan " + plan.string() +
                              " --set 'workload={trace: {path: t.csv, format: azure}}' --no-plots");
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_THAT(trace.err, HasSubstr("a trace has its own arrival times"));
}

}  // namespace
}  // namespace servelab
