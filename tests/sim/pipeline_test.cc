// Pipeline parallelism with batches in flight (issue 12): a hand-drawn timeline, the
// throughput a pipeline gains under load, and the latency it does not gain at batch 1.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/config_yaml.h"
#include "driver/csv_writer.h"
#include "sim/roofline_cost_model.h"
#include "sim/sim_backend.h"
#include "tests/sim/csv_rows.h"

namespace servelab {
namespace {

ExperimentConfig Parse(const std::string& yaml) {
  auto c = ParseExperiment(yaml, "exp.yaml", "/");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

// Seconds as steps.csv writes them, from whole ms: 10 -> "0.01".
std::string Ms(int64_t ms) {
  std::string s;
  AppendDecimal(s, ms, 3);
  return s;
}

using testing::Column;
using testing::ParseCsv;

// Four stages of 1 ms each (a constant 4 ms step split evenly), eight requests at t = 0,
// two a batch (max_num_seqs 2), two output tokens each. Drawn by hand, in ms:
//
//   stage 0  |b0|b1|b2|b3|b4|b5|b6|b7|
//   stage 1     |b0|b1|b2|b3|b4|b5|b6|b7|
//   stage 2        |b0|b1|b2|b3|b4|b5|b6|b7|
//   stage 3           |b0|b1|b2|b3|b4|b5|b6|b7|
//            0  1  2  3  4  5  6  7  8  9  10 11
//
// b0..b3 prefill requests (0,1), (2,3), (4,5), (6,7), entering stage 0 as it frees. b0
// completes at 4 ms and its requests' first tokens are out; they decode in b4, which
// enters stage 0 at 4 ms (b3 left it then), and so on. The bubble: stage s idle for s ms
// at the start; the drain: stage 0 idle after 8 ms, stage 3 busy until 11 ms.
TEST(PipelineTest, FourStagesAndABurstFollowTheHandDrawnTimeline) {
  const ExperimentConfig c = Parse(
      "name: pp\nmodel: llama-2-7b\n"
      "hardware: {gpu: a100-80gb, pipeline_parallel: 4, num_gpu_blocks: 1000}\n"
      "scheduler: {max_num_seqs: 2}\ncost_model: {type: constant, step_ms: 4}\n"
      "workload:\n  num_requests: 8\n  arrival: {process: burst}\n"
      "  input_tokens: {dist: fixed, value: 10}\n  output_tokens: {dist: fixed, value: 2}\n");
  std::ostringstream requests, steps, trace;
  auto outcome = RunSimulation(c, MetricsSinks{&requests, &steps, &trace, 1000});
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  const RunSummary& s = outcome->summary;
  EXPECT_EQ(s.num_finished, 8);
  EXPECT_EQ(s.num_steps, 8);
  EXPECT_DOUBLE_EQ(s.makespan_s, 0.011);
  // 8 batches x 4 stages x 1 ms of 4 stages x 11 ms.
  EXPECT_DOUBLE_EQ(s.gpu_busy_fraction, 32.0 / 44.0);

  const auto step_rows = ParseCsv(steps.str());
  ASSERT_EQ(step_rows.size(), 9u);
  const auto& header = step_rows[0];
  for (size_t b = 0; b < 8; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const auto& row = step_rows[b + 1];
    EXPECT_EQ(row[Column(header, "start_s")], Ms(static_cast<int64_t>(b)));
    EXPECT_EQ(row[Column(header, "duration_s")], "0.004");
    EXPECT_EQ(row[Column(header, "batch_size")], "2");
    EXPECT_EQ(row[Column(header, b < 4 ? "prefill_tokens" : "decode_tokens")], b < 4 ? "20" : "2");
    for (size_t stage = 0; stage < 4; ++stage) {
      EXPECT_EQ(row[Column(header, "stage" + std::to_string(stage) + "_start_s")],
                Ms(static_cast<int64_t>(b + stage)));
      EXPECT_EQ(row[Column(header, "stage" + std::to_string(stage) + "_duration_s")], "0.001");
    }
  }

  // The trace: a named track per stage, each with the 8 batches' slices, 1 ms apart.
  const auto json = nlohmann::json::parse(trace.str());
  std::vector<int> slices(4, 0), names(4, 0);
  for (const auto& e : json["traceEvents"]) {
    if (e["name"] == "thread_name") ++names[e["tid"].get<size_t>()];
    if (e["name"] == "step") {
      const auto stage = e["tid"].get<size_t>();
      EXPECT_EQ(e["ts"].get<double>(), 1000.0 * (slices[stage] + static_cast<double>(stage)));
      EXPECT_EQ(e["dur"].get<double>(), 1000.0);
      ++slices[stage];
    }
  }
  EXPECT_EQ(slices, std::vector<int>(4, 8));
  EXPECT_EQ(names, std::vector<int>(4, 1));

  // Request i: first token when its prefill batch completes (4 + i/2 ms), the second when
  // its decode batch does (8 + i/2 ms).
  const auto request_rows = ParseCsv(requests.str());
  ASSERT_EQ(request_rows.size(), 9u);
  const auto& rh = request_rows[0];
  for (size_t r = 1; r < request_rows.size(); ++r) {
    const auto& row = request_rows[r];
    const int id = std::stoi(row[Column(rh, "id")]);
    EXPECT_EQ(row[Column(rh, "first_token_s")], Ms(4 + id / 2)) << id;
    EXPECT_EQ(row[Column(rh, "finish_s")], Ms(8 + id / 2)) << id;
  }
}

ExperimentConfig Saturated(int32_t pp) {
  return Parse(
      "name: load\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb, pipeline_parallel: " +
      std::to_string(pp) +
      "}\nscheduler: {max_num_seqs: 16}\n"
      "workload:\n  num_requests: 512\n  arrival: {process: burst}\n"
      "  input_tokens: {dist: fixed, value: 16}\n  output_tokens: {dist: fixed, value: 256}\n");
}

// Under load a pipeline of k stages works on k batches at once: 4 stages of 8 layers
// each decode a batch of 16 in about a quarter of one GPU's time, so output throughput
// approaches 4x that of PP 1 at the same batch, less the stage transfers.
TEST(PipelineTest, UnderLoadThroughputApproachesStagesTimesOneStage) {
  auto one = RunSimulation(Saturated(1));
  auto four = RunSimulation(Saturated(4));
  ASSERT_TRUE(one.ok() && four.ok());
  const double ratio = four->summary.output_throughput / one->summary.output_throughput;
  EXPECT_GT(ratio, 3.6);
  EXPECT_LE(ratio, 4.0);
  EXPECT_GT(four->summary.gpu_busy_fraction, 0.9);
}

// One request alone is in one batch at a time: every token crosses all four stages and
// the three transfers, so it is no faster than on one GPU.
TEST(PipelineTest, AtBatchOneItIsNoFasterThanOneStage) {
  auto alone = [](int32_t pp) {
    ExperimentConfig c = Saturated(pp);
    c.workload.num_requests = 1;
    auto outcome = RunSimulation(c);
    EXPECT_TRUE(outcome.ok());
    return outcome->summary;
  };
  const RunSummary one = alone(1), four = alone(4);
  EXPECT_GE(four.tpot_s.mean, one.tpot_s.mean);
  EXPECT_LT(four.tpot_s.mean, one.tpot_s.mean * 1.02);  // the transfers are small
}

// The roofline's stage times: each stage its layers' share, the transfers between, all
// summing to the step's time exactly.
TEST(PipelineTest, RooflineStageTimesSumToTheStepTime) {
  DeploymentSpec d;
  d.model = Parse("name: x\nmodel: llama-2-70b\nhardware: {gpu: h100-80gb}\n").model;
  d.gpu = Parse("name: x\nmodel: llama-2-7b\nhardware: {gpu: h100-80gb}\n").hardware.gpu;
  d.tensor_parallel = 4;
  d.pipeline_parallel = 3;  // 80 layers: 27, 27, 26
  const RooflineCostModel model(RooflineOptions{}, d);
  std::deque<Request> rs(40);
  StepPlan plan;
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].prompt_len = 100;
    rs[i].num_computed_tokens = 100 + static_cast<int32_t>(i);
    rs[i].num_generated = static_cast<int32_t>(i) + 1;
    plan.seqs.push_back(ScheduledRequest{&rs[i], 1, rs[i].num_computed_tokens, true, false});
  }
  std::vector<TimeNs> stages(3);
  model.StageTimes(plan, stages);
  EXPECT_EQ(stages[0] + stages[1] + stages[2], model.StepTime(plan));
  // The first two stages hold 27 layers and pass activations on, the last holds 26 and
  // the LM head. On 8-GPU nodes stage 1 (GPUs 4-7) passes them to the next node (GPUs
  // 8-11) over the network: slower than stage 0's NVLink hop.
  EXPECT_GT(stages[1], stages[0]);
  EXPECT_NE(stages[2], stages[1]);
  d.gpus_per_node = 16;
  const RooflineCostModel one_node(RooflineOptions{}, d);
  one_node.StageTimes(plan, stages);
  EXPECT_EQ(stages[0] + stages[1] + stages[2], one_node.StepTime(plan));
  EXPECT_NEAR(static_cast<double>(stages[0]), static_cast<double>(stages[1]), 2.0);
}

// Random pipelined runs (policies, preemption by recompute or swap under KV pressure,
// replicas, loads): every request is served in full, each stage holds one batch at a
// time, and a batch enters each stage only after leaving the one before.
TEST(PipelineTest, RandomPipelinesConserveTokensAndKeepStagesExclusive) {
  std::mt19937_64 rng(12);
  const char* policies[] = {"fcfs", "sjf", "vtc", "mlfq", "{name: priority, preemptive: true}"};
  int64_t preemptions = 0, swapped = 0, overlapping = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const int pp = 2 + static_cast<int>(rng() % 3);
    const std::string yaml =
        "name: r\nseed: " + std::to_string(trial) +
        "\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb, pipeline_parallel: " + std::to_string(pp) +
        ", num_gpu_blocks: " + std::to_string(60 + rng() % 400) +
        ", swap_space_gib: 1}\ncluster: {replicas: " + std::to_string(1 + rng() % 2) +
        "}\nscheduler: {policy: " + policies[rng() % 5] +
        ", max_num_seqs: " + std::to_string(1 + rng() % 12) +
        ", max_num_batched_tokens: 512, preemption: " + (rng() % 2 ? "swap" : "recompute") +
        "}\nworkload:\n  num_requests: 120\n  arrival: {process: poisson, rate: " +
        std::to_string(5 + rng() % 60) +
        "}\n  input_tokens: {dist: uniform, min: 1, max: 300}\n"
        "  output_tokens: {dist: uniform, min: 1, max: 120}\n"
        "  clients:\n    - {name: a, share: 1}\n    - {name: b, share: 1}\n";
    SCOPED_TRACE(yaml);
    std::ostringstream requests, steps;
    auto outcome = RunSimulation(Parse(yaml), MetricsSinks{&requests, &steps, nullptr, 0});
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    const RunSummary& s = outcome->summary;
    EXPECT_EQ(s.num_finished + s.num_rejected, 120);
    preemptions += s.preemptions;
    swapped += s.swap_out_blocks;
    // Every finished request got all its tokens: the requests.csv rows' output equals
    // the target the workload drew (output_tokens is what was generated).
    const auto rows = ParseCsv(requests.str());
    int64_t generated = 0;
    for (size_t r = 1; r < rows.size(); ++r) {
      if (rows[r][Column(rows[0], "status")] == "finished") {
        generated += std::stoll(rows[r][Column(rows[0], "output_tokens")]);
      }
    }
    EXPECT_EQ(generated, s.output_tokens);
    // Stage exclusivity, per replica and stage, in each batch's order of entry.
    const auto step_rows = ParseCsv(steps.str());
    const auto& header = step_rows[0];
    std::map<std::pair<std::string, int>, double> stage_free;
    std::map<std::string, double> last_finish;
    for (size_t r = 1; r < step_rows.size(); ++r) {
      const auto& row = step_rows[r];
      const std::string replica = row[Column(header, "replica")];
      if (std::stod(row[Column(header, "start_s")]) < last_finish[replica]) ++overlapping;
      double previous_end = std::stod(row[Column(header, "start_s")]);
      for (int stage = 0; stage < pp; ++stage) {
        const double start = std::stod(row[Column(header, "stage" + std::to_string(stage) + "_start_s")]);
        const double end = start + std::stod(row[Column(header, "stage" + std::to_string(stage) + "_duration_s")]);
        EXPECT_GE(start, previous_end - 1e-12) << "batch " << r << " stage " << stage;
        const auto key = std::make_pair(row[Column(header, "replica")], stage);
        // Rows come in completion order, which for one replica is the order of entry.
        EXPECT_GE(start, stage_free[key] - 1e-12) << "batch " << r << " stage " << stage;
        stage_free[key] = end;
        previous_end = end;
      }
      const double finish = std::stod(row[Column(header, "start_s")]) +
                            std::stod(row[Column(header, "duration_s")]);
      EXPECT_NEAR(previous_end, finish, 1e-9) << "batch " << r;
      last_finish[replica] = finish;
    }
  }
  // The trials did what they are for: batches overlapped, KV pressure preempted, swapped.
  EXPECT_GT(overlapping, 1000);
  EXPECT_GT(preemptions, 10);
  EXPECT_GT(swapped, 10);
}

TEST(PipelineTest, StaticBatchingIsRefusedWithStages) {
  auto prepared = PrepareExperiment(Parse(
      "name: x\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb, pipeline_parallel: 2}\n"
      "scheduler: {batching: static}\nworkload: {num_requests: 1}\n"));
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("exp.yaml:4: scheduler.batching: static batching runs one "
                                             "batch at a time"),
            std::string::npos)
      << prepared.status().message();
}

}  // namespace
}  // namespace servelab
