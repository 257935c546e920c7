// The `sweep:` grid (cli/sweep_config.h) and `servelab sweep`: expansion order, folder
// names, validation before anything runs, and results independent of --jobs.
#include "driver/sweep_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/sweep_runner.h"
#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ReadFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kBase = R"(name: grid
seed: 5
model: llama-2-7b
hardware: {gpu: a100-80gb}
scheduler: {max_num_seqs: 16}
workload:
  num_requests: 30
  arrival: {process: poisson, rate: 20}
  input_tokens: {dist: uniform, min: 10, max: 200}
  output_tokens: {dist: uniform, min: 1, max: 40}
)";

std::string ErrorOf(const std::string& sweep_block, const std::vector<std::string>& sets = {}) {
  auto sweep = ParseSweep(std::string(kBase) + sweep_block, "exp.yaml", ".", sets);
  return sweep.ok() ? "(no error)" : sweep.status().message();
}

TEST(SweepConfigTest, ExpandsTheGridLastAxisFastest) {
  auto sweep = ParseSweep(std::string(kBase) +
                              "sweep:\n"
                              "  scheduler.max_num_seqs: [8, 32]\n"
                              "  workload.arrival.rate: [4, 8.5, 12]\n",
                          "exp.yaml", ".", {});
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  ASSERT_EQ(sweep->axes.size(), 2u);
  EXPECT_EQ(sweep->axes[0].key, "scheduler.max_num_seqs");
  EXPECT_THAT(sweep->axes[1].values, ElementsAre("4", "8.5", "12"));
  EXPECT_THAT(sweep->axes[1].wheres, ElementsAre("exp.yaml:13", "exp.yaml:13", "exp.yaml:13"));
  ASSERT_EQ(sweep->points.size(), 6u);
  const int seqs[] = {8, 8, 8, 32, 32, 32};
  const double rates[] = {4, 8.5, 12, 4, 8.5, 12};
  for (size_t p = 0; p < 6; ++p) {
    EXPECT_THAT(sweep->points[p].index, ElementsAre(p / 3, p % 3));
    EXPECT_EQ(sweep->points[p].config.scheduler.max_num_seqs, seqs[p]);
    EXPECT_EQ(sweep->points[p].config.workload.arrival.rate, rates[p]);
    EXPECT_EQ(sweep->points[p].config.seed, 5);  // untouched keys keep the file's value
  }
  EXPECT_EQ(sweep->points[0].folder, "max_num_seqs-8_rate-4");
  EXPECT_EQ(sweep->points[4].folder, "max_num_seqs-32_rate-8.5");
}

TEST(SweepConfigTest, ValuesMayBeMappingsAndSetAppliesFirst) {
  auto sweep = ParseSweep(std::string(kBase) +
                              "sweep:\n"
                              "  scheduler.policy: [fcfs, {name: fcfs}]\n"
                              "  workload.arrival.rate: [2]\n",
                          "exp.yaml", ".",
                          {"workload.arrival={process: gamma, rate: 1, cv: 3}"});
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  EXPECT_THAT(sweep->axes[0].values, ElementsAre("fcfs", "{name: fcfs}"));
  ASSERT_EQ(sweep->points.size(), 2u);
  EXPECT_EQ(sweep->points[0].folder, "policy-fcfs_rate-2");
  EXPECT_EQ(sweep->points[1].folder, "policy-fcfs_rate-2~2");
  for (const auto& point : sweep->points) {
    EXPECT_EQ(point.config.scheduler.policy.name, "fcfs");
    EXPECT_EQ(point.config.workload.arrival.rate, 2);  // the sweep inside the --set mapping
    EXPECT_EQ(point.config.workload.arrival.cv, 3);
  }
}

TEST(SweepConfigTest, FolderNamesAreSafeAndUnique) {
  EXPECT_EQ(SanitizeName("{name: sjf, predictor: noisy}"), "name-sjf-predictor-noisy");
  EXPECT_EQ(SanitizeName("sjf:predictor=noisy:sigma=1.0"), "sjf-predictor-noisy-sigma-1.0");
  EXPECT_EQ(SanitizeName("-1"), "-1");
  EXPECT_EQ(SanitizeName("../x"), "..-x");
  EXPECT_EQ(SanitizeName("  "), "empty");
  std::vector<std::string> names = {"a-b", "A-B", "a-b~2", "c", "a-b"};
  MakeUnique(names);
  EXPECT_THAT(names, ElementsAre("a-b", "A-B~3", "a-b~2", "c", "a-b~4"));

  // Axes sharing a last key part are told apart by more of the key; values that
  // sanitize alike still get distinct folders.
  auto sweep = ParseSweep(std::string(kBase) +
                              "sweep:\n"
                              "  workload.input_tokens.min: [1, 2]\n"
                              "  workload.output_tokens.min: [1]\n"
                              "  name: ['a b', 'a-b', 'a/b']\n",
                          "exp.yaml", ".", {});
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  EXPECT_EQ(sweep->points[0].folder, "input_tokens.min-1_output_tokens.min-1_name-a-b");
  EXPECT_EQ(sweep->points[1].folder, "input_tokens.min-1_output_tokens.min-1_name-a-b~2");
  EXPECT_EQ(sweep->points[2].folder, "input_tokens.min-1_output_tokens.min-1_name-a-b~3");
  std::map<std::string, int> seen;
  for (const auto& p : sweep->points) EXPECT_EQ(++seen[p.folder], 1) << p.folder;
}

TEST(SweepConfigTest, ErrorsNameFileLineAndKey) {
  EXPECT_THAT(ErrorOf("sweep:\n  scheduler.polcy: [fcfs]\n"),
              HasSubstr("exp.yaml:12: scheduler.polcy: unknown key 'polcy' (did you mean "
                        "'policy'?)"));
  // Only the failing value's points are named.
  EXPECT_EQ(ErrorOf("sweep:\n  scheduler.max_num_seqs: [8, zero]\n"),
            "exp.yaml:12: scheduler.max_num_seqs: expected an integer, got 'zero' (sweep point "
            "max_num_seqs-zero)");
  EXPECT_THAT(ErrorOf("sweep:\n  workload.arrival.rate:\n    - 4\n    - -1\n"),
              HasSubstr("exp.yaml:14: workload.arrival.rate: value -1 out of range"));
  EXPECT_EQ(ErrorOf("sweep:\n  workload.arrival.rate: []\n"),
            "exp.yaml:12: workload.arrival.rate: expected a non-empty list of values, e.g. [a, b]");
  EXPECT_THAT(ErrorOf("sweep:\n  workload.arrival.rate: 4\n"),
              HasSubstr("exp.yaml:12: workload.arrival.rate: expected a non-empty list"));
  EXPECT_THAT(ErrorOf("sweep: [1, 2]\n"), HasSubstr("exp.yaml:11: sweep: expected a mapping"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("exp.yaml: no `sweep:` block"));
  EXPECT_THAT(ErrorOf("sweep:\n  output.dir: [a, b]\n"),
              HasSubstr("exp.yaml:12: output.dir: each sweep point writes into its own folder"));
  EXPECT_THAT(ErrorOf("sweep:\n  workload.arrival: [{rate: 1}]\n  workload.arrival.rate: [2]\n"),
              HasSubstr("exp.yaml:13: workload.arrival.rate: overlaps sweep axis "
                        "'workload.arrival' (exp.yaml:12)"));
  EXPECT_THAT(ErrorOf("sweep:\n  workload.arrival.rate: [2]\n", {"workload.arrival.rate=3"}),
              HasSubstr("--set workload.arrival.rate: the sweep axis 'workload.arrival.rate' "
                        "(exp.yaml:12) sets it"));
  EXPECT_THAT(ErrorOf("sweep:\n  scheduler.max_num_seqs: [1, 1]\n  scheduler.max_num_seqs: [2]\n"),
              HasSubstr("exp.yaml:13: sweep.scheduler.max_num_seqs: duplicate key"));
  EXPECT_THAT(ErrorOf("sweep:\n  a: [1,2,3,4,5,6,7,8,9,10]\n  b: [1,2,3,4,5,6,7,8,9,10]\n"
                      "  c: [1,2,3,4,5,6,7,8,9,10]\n  d: [1,2,3,4,5,6,7,8,9,10]\n  e: [1, 2]\n"),
              HasSubstr("exp.yaml:11: sweep: the grid has more than 10000 points"));
  // Points within their bound, replicates within theirs, the runs they make not.
  std::string seeds = "sweep:\n  seed: [1";
  for (int i = 2; i <= 101; ++i) seeds += ", " + std::to_string(i);
  EXPECT_THAT(ErrorOf(seeds + "]\n", {"replicates=1000"}),
              HasSubstr("exp.yaml:11: sweep: 101 points and their replicates make 101000 runs; at most 100000"));
  // `sweep` is a top-level key only.
  auto nested = ParseSweep("name: x\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                           "scheduler:\n  sweep: {a: [1]}\nsweep: {seed: [1]}\n",
                           "exp.yaml", ".", {});
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.status().message(), HasSubstr("exp.yaml:5: scheduler.sweep: unknown key"));
}

TEST(SweepConfigTest, ValidationPreparesEveryPoint) {
  auto sweep = ParseSweep(std::string(kBase) + "sweep:\n  scheduler.policy:\n    - fcfs\n"
                                               "    - no-such-policy\n",
                          "exp.yaml", ".", {});
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  const Status status = ValidateSweep(*sweep, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsBadInput());
  EXPECT_THAT(status.message(), HasSubstr("exp.yaml:14"));
  EXPECT_THAT(status.message(), HasSubstr("no-such-policy"));
  EXPECT_THAT(status.message(), HasSubstr("(sweep point policy-no-such-policy)"));
}

// ---- the binary ----------------------------------------------------------------------


// Every file under `dir`, by relative path.
std::map<std::string, std::string> ReadTree(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = ReadFile(e.path());
  }
  return files;
}

using SweepCliTest = testing::CliFixture;

constexpr const char* kGrid =
    "sweep:\n  scheduler.max_num_seqs: [4, 16]\n  workload.arrival.rate: [5, 40]\n";

TEST_F(SweepCliTest, ResultsAreByteIdenticalWhateverTheJobs) {
  const fs::path exp = Write("grid.yaml", std::string(kBase) + kGrid);
  const fs::path out = dir_ / "out";
  const CliResult one = Run("sweep " + exp.string() + " --jobs 1 --out " + out.string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(one.err.empty()) << "no progress line when stderr is not a terminal: " << one.err;
  const auto serial = ReadTree(out);
  fs::remove_all(out);
  const CliResult two = Run("sweep " + exp.string() + " --jobs 2 --out " + out.string());
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const auto parallel = ReadTree(out);

  // 4 points x (at least) requests.csv, steps.csv, summary.json, summary.md, trace.json,
  // config.resolved.yaml; + sweep.csv.
  EXPECT_GE(serial.size(), 4u * 6u + 1u);
  ASSERT_EQ(serial.size(), parallel.size());
  for (const auto& [path, text] : serial) {
    ASSERT_TRUE(parallel.count(path)) << path;
    EXPECT_EQ(text, parallel.at(path)) << path;
  }
  const std::string csv = serial.at("sweep.csv");
  std::istringstream lines(csv);
  std::string header, row;
  std::getline(lines, header);
  EXPECT_THAT(header, HasSubstr("scheduler.max_num_seqs,workload.arrival.rate,folder,status,"
                                "finished,rejected,request_throughput"));
  EXPECT_THAT(header, HasSubstr("ttft_p99_s"));
  EXPECT_THAT(header, HasSubstr("cost_per_million_output_tokens,jain_index"));
  std::vector<std::string> rows;
  while (std::getline(lines, row)) rows.push_back(row.substr(0, row.find(",ok,")));
  EXPECT_THAT(rows, ElementsAre("4,5,max_num_seqs-4_rate-5", "4,40,max_num_seqs-4_rate-40",
                                "16,5,max_num_seqs-16_rate-5", "16,40,max_num_seqs-16_rate-40"));
  EXPECT_THAT(serial.at("max_num_seqs-16_rate-40/config.resolved.yaml"),
              HasSubstr("max_num_seqs: 16"));
}

TEST_F(SweepCliTest, BadPointExitsTwoBeforeRunningAnything) {
  const fs::path exp = Write("bad.yaml", std::string(kBase) +
                                             "sweep:\n  workload.arrival.rate: [5, 0]\n");
  const fs::path out = dir_ / "out";
  const CliResult r = Run("sweep " + exp.string() + " --jobs 2 --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(exp.string() + ":12: workload.arrival.rate: value 0 out of range"));
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(Run("sweep " + exp.string() + " --jobs -1").exit_code, 2);
  // A million threads would fail to start and abort: refused, naming the flag.
  const CliResult many = Run("sweep " + exp.string() + " --jobs 1000000");
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_THAT(many.err, HasSubstr("--jobs 1000000: must be in [0, 1024]"));
  EXPECT_EQ(Run("sweep").exit_code, 2);
  EXPECT_EQ(Run("sweep --help").exit_code, 0);
}

// The summary table's place is checked before any point runs: a folder where
// sweep.csv goes stops the sweep at once (exit 2), and no point's folder is made.
TEST_F(SweepCliTest, AFolderWhereTheTableGoesIsFoundBeforeRunning) {
  const fs::path exp = Write("grid.yaml", std::string(kBase) + kGrid);
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "sweep.csv");
  const CliResult r = Run("sweep " + exp.string() + " --jobs 2 --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("sweep.csv: is a folder"));
  EXPECT_FALSE(fs::exists(out / "max_num_seqs-4_rate-5"));
}

TEST_F(SweepCliTest, FailedPointExitsOneAndTheOthersComplete) {
  const fs::path exp = Write("grid.yaml", std::string(kBase) + kGrid);
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "max_num_seqs-4_rate-40") << "a file where the point's folder goes";
  const CliResult r = Run("sweep " + exp.string() + " --jobs 2 --out " + out.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("point max_num_seqs-4_rate-40 failed"));
  const std::string csv = ReadFile(out / "sweep.csv");
  EXPECT_THAT(csv, HasSubstr("4,40,max_num_seqs-4_rate-40,failed,,"));
  EXPECT_THAT(csv, HasSubstr("16,40,max_num_seqs-16_rate-40,ok,"));
  EXPECT_TRUE(fs::exists(out / "max_num_seqs-16_rate-40" / "summary.json"));
}

TEST_F(SweepCliTest, RunIgnoresTheSweepBlockWithANote) {
  const fs::path exp = Write("grid.yaml", std::string(kBase) + kGrid);
  const CliResult r = Run("run " + exp.string() + " --out " + (dir_ / "single").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("grid.yaml:11: the sweep block is ignored"));
  EXPECT_THAT(r.err, HasSubstr("servelab sweep"));
  EXPECT_THAT(ReadFile(dir_ / "single" / "config.resolved.yaml"), Not(HasSubstr("\nsweep:")));
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// The points of a sweep that create the same random model at once (found by the
// sanitizer run, whose slowness widened the window): one point saw the config.json the
// other had just written and read weights that were not there yet. A created model now
// appears whole, and every point runs.
TEST(SweepEngineTest, PointsCreatingTheSameModelAtOnceAllRun) {
  const fs::path dir = fs::temp_directory_path() / ("servelab_sweep_model_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string yaml = "name: m\nbackend: engine\n"
                           "engine: {model_path: model, create_model: true, model_seed: 3, kv_cache_gib: 0.01}\n"
                           "model: {base: llama-3-8b, name: m, hidden_size: 64, num_hidden_layers: 2,\n"
                           "        num_attention_heads: 2, num_key_value_heads: 1, intermediate_size: 128,\n"
                           "        vocab_size: 512, max_position_embeddings: 512}\n"
                           "hardware: {gpu: a10}\n"
                           "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 128}\n"
                           "workload: {num_requests: 4, input_tokens: {dist: fixed, value: 8},\n"
                           "           output_tokens: {dist: fixed, value: 4}}\n"
                           "sweep:\n  workload.arrival.rate: [1, 2, 3, 4]\n";
  std::ofstream(dir / "e.yaml") << yaml;
  const std::string command = std::string(SERVELAB_BINARY) + " sweep " + (dir / "e.yaml").string() +
                              " -j 4 --no-progress --out " + (dir / "out").string() + " >" +
                              (dir / "log").string() + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << ReadFile(dir / "log");
  EXPECT_TRUE(fs::exists(dir / "model" / "model.safetensors"));
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".creating."), std::string::npos)
        << "a copy left behind: " << e.path();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servelab
