// `servelab validate --recorded`: an engine run validate recorded, played back as the
// engine. Validated again on the same cost model, every figure of the engine side is the
// recording's to the byte and every step's prediction the same; a recording of other
// requests, a broken or missing recording, or an --out over it are errors that name them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::CliResult;
using testing::ReadFile;

class ValidateRecordedTest : public testing::CliFixture {};

TEST_F(ValidateRecordedTest, PlaysTheEngineRunBackStepForStep) {
  const fs::path exp = Write("engine.yaml",
                             "name: rec\nseed: 3\nbackend: engine\n"
                             "engine: {model_path: model, create_model: true, kv_cache_gib: 0.02, ignore_eos: true}\n"
                             "model: {base: llama-3-8b, name: t, hidden_size: 64, num_hidden_layers: 2,\n"
                             "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128,\n"
                             "        vocab_size: 97, max_position_embeddings: 512}\n"
                             "hardware: {gpu: a10}\n"
                             "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 16}\n"
                             "workload:\n"
                             "  num_requests: 12\n"
                             "  arrival: {process: poisson, rate: 100}\n"
                             "  input_tokens: {dist: uniform, min: 5, max: 40}\n"
                             "  output_tokens: {dist: uniform, min: 2, max: 12}\n"
                             "sweep:\n  workload.arrival.rate: [100, 400]\n");
  const std::string common = "validate " + exp.string() + " --no-plots --no-host-check";
  const CliResult first = Run(common + " --out " + (dir_ / "v").string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliResult played = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + (dir_ / "p").string());
  ASSERT_EQ(played.exit_code, 0) << played.err;
  for (const char* load : {"rate-100", "rate-400"}) {
    // The engine's requests, their times to the nanosecond, and each step's measured and
    // predicted time (the same cost model) as recorded.
    EXPECT_EQ(ReadFile(dir_ / "p" / load / "engine" / "requests.csv"),
              ReadFile(dir_ / "v" / load / "engine" / "requests.csv")) << load;
    EXPECT_EQ(ReadFile(dir_ / "p" / load / "steps_compared.csv"), ReadFile(dir_ / "v" / load / "steps_compared.csv"))
        << load;
    EXPECT_EQ(ReadFile(dir_ / "p" / load / "sim" / "requests.csv"), ReadFile(dir_ / "v" / load / "sim" / "requests.csv"))
        << load;
  }
  EXPECT_EQ(ReadFile(dir_ / "p" / "validation.csv"), ReadFile(dir_ / "v" / "validation.csv"));
  EXPECT_THAT(ReadFile(dir_ / "p" / "validation.md"), HasSubstr("Engine: played back from its recording"));
  EXPECT_THAT(played.out, HasSubstr("; replayed on the engine's step times: one (largest error +0.00%)"));

  // Other requests than the recorded ones: the first step that differs, named.
  const CliResult other = Run(common + " --recorded " + (dir_ / "v").string() + " --out " +
                              (dir_ / "o").string() + " --set seed=4");
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err, ::testing::ContainsRegex("rate-100/steps_compared.csv:[0-9]+: step [0-9]+ recorded "));
  EXPECT_THAT(other.err, HasSubstr("not the recorded requests or schedule"));
  // Not the recording's block size or clock: refused before anything runs.
  const CliResult blocks = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + (dir_ / "o3").string() +
                               " --set scheduler.block_size=32");
  EXPECT_EQ(blocks.exit_code, 2);
  EXPECT_THAT(blocks.err, HasSubstr("scheduler.block_size: 32, the recording's engine ran 16"));
  const CliResult wall = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + (dir_ / "o3").string() +
                             " --set engine.clock=wall");
  EXPECT_EQ(wall.exit_code, 2);
  EXPECT_THAT(wall.err, HasSubstr("engine.clock: a recording plays back on clock: virtual"));
  EXPECT_FALSE(fs::exists(dir_ / "o3"));
  // Played back on the recording's KV pool, whatever the experiment's GPU would hold: on an
  // H200 this tiny model's memory estimate is over 2^24 blocks, which a run would refuse.
  const CliResult big = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + (dir_ / "o4").string() +
                            " --set hardware.gpu=h200-141gb");
  EXPECT_EQ(big.exit_code, 0) << big.err;
  EXPECT_EQ(ReadFile(dir_ / "o4" / "rate-100" / "engine" / "requests.csv"),
            ReadFile(dir_ / "v" / "rate-100" / "engine" / "requests.csv"));
  // Run past the recording's end: fewer steps recorded than the run makes.
  const std::string steps = ReadFile(dir_ / "v" / "rate-100" / "steps_compared.csv");
  fs::copy(dir_ / "v", dir_ / "short", fs::copy_options::recursive);
  Write("short/rate-100/steps_compared.csv", steps.substr(0, steps.find('\n', steps.find('\n') + 1) + 1));
  const CliResult ended = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(ended.exit_code, 2);
  EXPECT_THAT(ended.err, HasSubstr("rate-100: "));
  EXPECT_THAT(ended.err, HasSubstr("the recording ends after 1 steps"));

  // A broken recording: file, line and column named; nothing written over it.
  const std::string bad_row = steps.substr(0, steps.find('\n') + 1) + "16,x,0,0,1.0,1.0,,\n";
  Write("short/rate-100/steps_compared.csv", bad_row);
  const CliResult broken = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_THAT(broken.err, HasSubstr("short/rate-100/steps_compared.csv:2: expected a whole number in [1, 2147483647], "
                                    "got 'x', column 'seqs'"));
  Write("short/rate-100/steps_compared.csv", "tokens,seqs,measured_ms\n1,1,1\n");
  const CliResult columns = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(columns.exit_code, 2);
  EXPECT_THAT(columns.err, HasSubstr("missing column 'context_tokens'"));
  Write("short/rate-100/steps_compared.csv", steps);
  Write("short/rate-100/engine/summary.json", "{\"backend\": ");
  const CliResult json = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(json.exit_code, 2);
  EXPECT_THAT(json.err, HasSubstr("summary.json: not JSON (at byte "));
  Write("short/rate-100/engine/summary.json", "{\"backend\": \"sim\", \"kv_blocks_per_replica\": 10}");
  const CliResult sim = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(sim.exit_code, 2);
  EXPECT_THAT(sim.err, HasSubstr("summary.json: backend: expected \"engine\""));
  Write("short/rate-100/engine/summary.json", "{\"backend\": \"engine\", \"max_model_len\": 512}");
  const CliResult pool = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(pool.exit_code, 2);
  EXPECT_THAT(pool.err, HasSubstr("summary.json: kv_blocks_per_replica: expected a whole number"));
  const CliResult missing = Run(common + " --recorded " + (dir_ / "none").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--recorded " + (dir_ / "none").string() + ": not a folder"));
  // rate-100 whole again; rate-400's folder gone.
  fs::copy_file(dir_ / "v" / "rate-100" / "engine" / "summary.json", dir_ / "short" / "rate-100" / "engine" / "summary.json",
                fs::copy_options::overwrite_existing);
  fs::remove_all(dir_ / "short" / "rate-400");
  const CliResult no_load = Run(common + " --recorded " + (dir_ / "short").string() + " --out " + (dir_ / "o2").string());
  EXPECT_EQ(no_load.exit_code, 2);
  EXPECT_THAT(no_load.err, HasSubstr("rate-400: " + (dir_ / "short" / "rate-400" / "steps_compared.csv").string()));
  EXPECT_FALSE(fs::exists(dir_ / "o2")) << "every recording is read before the first load runs";

  // --out over the recording (or within it), or runs of the engine again: refused, the
  // recording untouched.
  const auto before = testing::Tree(dir_ / "v");
  for (const std::string& out : {(dir_ / "v").string(), (dir_ / "v" / "again").string(), dir_.string()}) {
    const CliResult over = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + out);
    EXPECT_EQ(over.exit_code, 2) << out;
    EXPECT_THAT(over.err, HasSubstr("write the new validation elsewhere")) << out;
  }
  for (const char* flag : {" --engine-runs 2", " --retries 1 --max-wander 5"}) {
    const CliResult runs = Run(common + " --recorded " + (dir_ / "v").string() + " --out " + (dir_ / "o").string() + flag);
    EXPECT_EQ(runs.exit_code, 2) << flag;
    EXPECT_THAT(runs.err, HasSubstr("cannot go with --engine-runs or --retries")) << flag;
  }
  EXPECT_TRUE(testing::Differences(before, testing::Tree(dir_ / "v")).empty());
}

// The H200's recording (experiments/results/h200/run4/validation: Llama-3-8B on the CUDA
// engine, three loads): played back here, the scheduler remakes every step the engine ran
// and the engine's figures come out as the device's run measured them.
TEST_F(ValidateRecordedTest, TheH200RecordingPlaysBack) {
  const fs::path source(SERVELAB_SOURCE_DIR);
  const fs::path run = source / "experiments" / "results" / "h200" / "run4";
  const CliResult r = Run("validate " + (source / "experiments" / "gpu" / "validation_cuda.yaml").string() +
                          " --cost-model " + (run / "calibration" / "MODEL.yaml").string() + " --recorded " +
                          (run / "validation").string() + " --out " + (dir_ / "h").string() + " --no-plots");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* load : {"rate-15", "rate-29", "rate-41"}) {
    const auto device = nlohmann::json::parse(ReadFile(run / "validation" / load / "engine_summary.json"));
    const auto played = nlohmann::json::parse(ReadFile(dir_ / "h" / load / "engine" / "summary.json"));
    EXPECT_EQ(played["num_steps"], device["num_steps"]) << load;
    EXPECT_EQ(played["kv_blocks_per_replica"], device["kv_blocks_per_replica"]) << load;
    for (const char* metric : {"ttft_s", "tpot_s", "e2e_s"}) {
      for (const char* at : {"p50", "p99", "mean"}) {
        const double want = device[metric][at].get<double>();
        EXPECT_NEAR(played[metric][at].get<double>(), want, 1e-9 * want) << load << " " << metric << " " << at;
      }
    }
    EXPECT_NEAR(played["request_throughput"].get<double>(), device["request_throughput"].get<double>(), 1e-9)
        << load;
    // Every step's measured time as recorded.
    const std::string recorded = ReadFile(run / "validation" / load / "steps_compared.csv");
    const std::string again = ReadFile(dir_ / "h" / load / "steps_compared.csv");
    auto measured = [](const std::string& csv) {  // the first five columns of every row
      std::string kept;
      for (size_t at = 0; at < csv.size();) {
        size_t end = csv.find('\n', at);
        if (end == std::string::npos) end = csv.size();
        size_t cut = at;
        for (int k = 0; k < 5; ++k) cut = csv.find(',', cut) + 1;
        kept += csv.substr(at, cut - at) + "\n";
        at = end + 1;
      }
      return kept;
    };
    EXPECT_EQ(measured(again), measured(recorded)) << load;
  }
  EXPECT_THAT(r.out, HasSubstr("rate-41: 418 steps"));
}

}  // namespace
}  // namespace servelab
