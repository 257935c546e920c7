// End-to-end runs of the simulator on small workloads: queueing theory, conservation,
// static vs continuous batching, routing and determinism.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "core/text.h"
#include "tests/sim/csv_rows.h"
#include "driver/driver.h"
#include "driver/experiment.h"
#include "sim/sim_backend.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

ExperimentConfig BaseConfig() {
  ExperimentConfig c;
  c.name = "test";
  c.seed = 42;
  c.model = *FindModel("llama-2-7b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.workload.num_requests = 1000;
  c.workload.arrival.process = ArrivalProcess::kPoisson;
  c.workload.arrival.rate = 10;
  return c;
}

using testing::Column;
using testing::ParseCsv;

RunSummary RunConfig(const ExperimentConfig& config, MetricsSinks sinks = {}) {
  auto outcome = RunSimulation(config, sinks);
  EXPECT_TRUE(outcome.ok()) << outcome.status().message();
  return outcome->summary;
}

// M/D/1: one server (max_num_seqs 1), deterministic service (constant cost model, one
// output token = one iteration), Poisson arrivals at rho = 0.8. Pollaczek-Khinchine:
// mean wait = rho * S / (2 (1 - rho)) = 2 S, mean sojourn = 3 S.
TEST(SimulatorTest, MD1MeanSojournMatchesPollaczekKhinchine) {
  ExperimentConfig c = BaseConfig();
  const double service_s = 0.010;
  const double rho = 0.8;
  c.cost_model = NamedParams{"constant", {Param{"step_ms", FormatDouble(service_s * 1e3), ""}},
                             "cost_model", "", ""};
  c.scheduler.max_num_seqs = 1;
  c.workload.num_requests = 1'000'000;
  c.workload.arrival.rate = rho / service_s;
  c.workload.input_tokens = LengthDistConfig::Fixed(16);
  c.workload.output_tokens = LengthDistConfig::Fixed(1);
  const RunSummary s = RunConfig(c);
  ASSERT_EQ(s.num_finished, 1'000'000);
  const double expected_wait = rho * service_s / (2 * (1 - rho));
  EXPECT_NEAR(s.e2e_s.mean, expected_wait + service_s, 0.03 * (expected_wait + service_s));
  EXPECT_NEAR(s.queue_s.mean, expected_wait, 0.04 * expected_wait);
  EXPECT_NEAR(s.gpu_busy_fraction, rho, 0.01);
}

// Every request finishes or is rejected exactly once, each finished request generated
// exactly its target, and every KV block is free at the end — under heavy preemption.
TEST(SimulatorTest, ConservationUnderPreemptionAndRejection) {
  ExperimentConfig c = BaseConfig();
  c.workload.num_requests = 600;
  c.workload.arrival.rate = 40;
  c.workload.input_tokens.dist = LengthDist::kLognormal;
  c.workload.input_tokens.mean = 600;
  c.workload.input_tokens.cv = 1.0;
  c.workload.output_tokens.dist = LengthDist::kUniform;
  c.workload.output_tokens.min = 1;
  c.workload.output_tokens.max = 400;
  c.scheduler.max_model_len = 2048;   // some prompts exceed it: rejected
  c.scheduler.max_num_batched_tokens = 512;
  c.hardware.num_gpu_blocks = 160;    // 2,560 tokens of KV: constant preemption

  auto prepared = PrepareExperiment(c);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  std::ostringstream requests_csv;
  MetricsSinks sinks;
  sinks.requests_csv = &requests_csv;
  auto backends = MakeSimBackendFactory(prepared->config);
  ASSERT_TRUE(backends.ok()) << backends.status().message();
  VirtualClock clock;
  auto sim = Driver::Create(prepared->driver, std::move(prepared->workload), *backends,
                            RegistryPolicyMaker(BuiltinPolicies(), c.scheduler.policy), clock,
                            sinks);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  auto summary = (*sim)->Run();
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  const RunSummary& s = *summary;

  EXPECT_EQ((*sim)->ReplicaScheduler(0).Kv().NumUsedBlocks(), 0);
  EXPECT_FALSE((*sim)->ReplicaScheduler(0).HasWork());
  EXPECT_EQ(s.num_finished + s.num_rejected, 600);
  EXPECT_GT(s.num_rejected, 0);
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.recomputed_tokens, 0);

  // Regenerate the same request stream to know each request's target.
  auto again = MakeWorkload(c.workload, c.seed);
  std::map<int64_t, Request> targets;
  Request r;
  while ((*again)->Next(r)) targets[r.id] = r;
  ASSERT_EQ(targets.size(), 600u);

  const auto rows = ParseCsv(requests_csv.str());
  const auto& header = rows.at(0);
  const int id_col = Column(header, "id"), status_col = Column(header, "status");
  const int out_col = Column(header, "output_tokens"), in_col = Column(header, "input_tokens");
  std::map<int64_t, int> seen;
  int64_t generated = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const int64_t id = std::stoll(rows[i][id_col]);
    ++seen[id];
    const Request& t = targets.at(id);
    EXPECT_EQ(std::stoi(rows[i][in_col]), t.prompt_len);
    if (rows[i][status_col] == "finished") {
      EXPECT_EQ(std::stoi(rows[i][out_col]), t.target_output_len) << "request " << id;
      generated += t.target_output_len;
    } else {
      EXPECT_EQ(rows[i][status_col], "rejected");
      EXPECT_GT(t.prompt_len + t.target_output_len, 2048) << "request " << id;
    }
  }
  EXPECT_EQ(seen.size(), 600u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << "request " << id;
  EXPECT_EQ(generated, s.output_tokens);
}

// The seeds' comparison: static batching never beats continuous batching in throughput,
// and its mean latency is worse, on the same request stream.
TEST(SimulatorTest, StaticBatchingNeverBeatsContinuous) {
  for (double rate : {5.0, 20.0, 1000.0}) {
    ExperimentConfig c = BaseConfig();
    c.workload.num_requests = 400;
    c.workload.arrival.rate = rate;
    c.workload.input_tokens.dist = LengthDist::kUniform;
    c.workload.input_tokens.min = 50;
    c.workload.input_tokens.max = 500;
    c.workload.output_tokens.dist = LengthDist::kUniform;
    c.workload.output_tokens.min = 5;
    c.workload.output_tokens.max = 300;
    c.scheduler.max_num_seqs = 32;
    const RunSummary continuous = RunConfig(c);
    c.scheduler.batching = Batching::kStatic;
    const RunSummary stat = RunConfig(c);
    EXPECT_EQ(stat.num_finished, continuous.num_finished);
    EXPECT_LE(stat.output_throughput, continuous.output_throughput) << "rate " << rate;
    EXPECT_GT(stat.e2e_s.mean, continuous.e2e_s.mean) << "rate " << rate;
  }
}

TEST(SimulatorTest, RoundRobinAlternatesReplicas) {
  ExperimentConfig c = BaseConfig();
  c.workload.num_requests = 50;
  c.cluster.replicas = 3;
  std::ostringstream requests_csv;
  MetricsSinks sinks;
  sinks.requests_csv = &requests_csv;
  RunConfig(c, sinks);
  const auto rows = ParseCsv(requests_csv.str());
  const int id_col = Column(rows[0], "id"), replica_col = Column(rows[0], "replica");
  ASSERT_EQ(rows.size(), 51u);
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(std::stoll(rows[i][replica_col]), std::stoll(rows[i][id_col]) % 3);
  }
}

// A burst at t = 0 is one batch: the idle replica waits for every event at that instant.
TEST(SimulatorTest, BurstArrivalsFormOneBatch) {
  ExperimentConfig c = BaseConfig();
  c.workload.num_requests = 8;
  c.workload.arrival.process = ArrivalProcess::kBurst;
  std::ostringstream steps_csv;
  MetricsSinks sinks;
  sinks.steps_csv = &steps_csv;
  RunConfig(c, sinks);
  const auto rows = ParseCsv(steps_csv.str());
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[1][Column(rows[0], "batch_size")], "8");
  EXPECT_EQ(rows[1][Column(rows[0], "start_s")].find_first_not_of("0."), std::string::npos);
}

TEST(SimulatorTest, SameSeedGivesByteIdenticalOutputs) {
  ExperimentConfig c = BaseConfig();
  c.workload.num_requests = 300;
  c.workload.arrival.rate = 30;
  c.workload.input_tokens.dist = LengthDist::kLognormal;
  c.workload.input_tokens.mean = 400;
  c.hardware.num_gpu_blocks = 400;
  std::string outputs[2];
  for (auto& out : outputs) {
    std::ostringstream requests, steps, trace;
    MetricsSinks sinks{&requests, &steps, &trace, 1000};
    const RunSummary s = RunConfig(c, sinks);
    out = requests.str() + steps.str() + trace.str() + s.ToJson().dump();
  }
  EXPECT_GT(outputs[0].size(), 1000u);
  EXPECT_EQ(outputs[0], outputs[1]);
  c.seed = 43;
  std::ostringstream requests;
  RunConfig(c, MetricsSinks{&requests, nullptr, nullptr, 0});
  EXPECT_NE(outputs[0].substr(0, requests.str().size()), requests.str());
}

// A step longer than kMaxStepTime (figures out of any real range) ends the run with an
// error naming it, not an overflowed time or a CHECK.
TEST(SimulatorTest, AStepPastTheTimeRangeIsAnError) {
  ExperimentConfig c = BaseConfig();
  c.workload.num_requests = 3;
  c.workload.input_tokens = LengthDistConfig::Fixed(2000);
  c.cost_model = NamedParams{"linear", {Param{"per_context_token_ms", "1e6", ""}}, "cost_model",
                             "", ""};
  auto outcome = RunSimulation(c, MetricsSinks{});
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find("the cost model predicts a step of"), std::string::npos)
      << outcome.status().message();
  EXPECT_NE(outcome.status().message().find("replica 0, step 0"), std::string::npos);
}

}  // namespace
}  // namespace servelab
