// Decode runs (DESIGN.md, Speed): advancing runs of decode-only iterations in one stride
// must change no output. Whole result folders of shipped experiments and of random
// configs, run with runs (the default) and stepping every iteration
// (SERVELAB_DECODE_RUNS=0), must be identical byte for byte.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

using servelab::testing::CliFixture;
using servelab::testing::Differences;
using servelab::testing::Tree;

class DecodeRunsTest : public CliFixture {
 protected:
  // `servelab <command> <args> --out <dir>/<name>` both ways (the folder named alike, as
  // the files record it); the folders and stdout must match.
  void ExpectSameBothWays(const std::string& command, const std::string& args,
                          const std::string& name) {
    SCOPED_TRACE(name);
    const std::filesystem::path out = dir_ / name, runs = dir_ / (name + ".runs");
    const std::string line = command + " " + args + " --out " + out.string() + " --no-progress" +
                             (command == "compare" ? " --no-plots" : "");
    const auto with_runs = Run(line);
    ASSERT_EQ(with_runs.exit_code, 0) << with_runs.err;
    std::filesystem::rename(out, runs);
    ::setenv("SERVELAB_DECODE_RUNS", "0", 1);
    const auto stepped = Run(line);
    ::unsetenv("SERVELAB_DECODE_RUNS");
    ASSERT_EQ(stepped.exit_code, 0) << stepped.err;
    EXPECT_EQ(with_runs.out, stepped.out);
    const auto a = Tree(runs), b = Tree(out);
    EXPECT_GT(a.size(), 3u);
    EXPECT_EQ(Differences(a, b), std::vector<std::string>{});
  }
};

std::string Experiment(const std::string& relative) {
  return std::string(SERVELAB_SOURCE_DIR) + "/experiments/" + relative;
}

TEST_F(DecodeRunsTest, ShippedExperimentsGiveTheSameFolders) {
  for (const char* name : {"quickstart", "static_vs_continuous"}) {
    ExpectSameBothWays("run", Experiment(std::string(name) + ".yaml"), name);
  }
  ExpectSameBothWays("run", Experiment("engine_cpu.yaml") + " --set backend=sim", "engine_cpu_sim");
  for (const char* name : {"mlfq_vs_fcfs", "priority_classes", "sjf_vs_fcfs", "sla_adaptive",
                           "swap_vs_recompute", "vtc_overload"}) {
    ExpectSameBothWays("run", Experiment(std::string("policies/") + name + ".yaml"), name);
  }
  for (const char* name : {"lpm_vs_fcfs", "routing", "sessions", "system_prompts"}) {
    ExpectSameBothWays("run", Experiment(std::string("prefix/") + name + ".yaml"), name);
  }
  ExpectSameBothWays("run", Experiment("moe/mixtral_tp_vs_ep.yaml"), "mixtral");
  ExpectSameBothWays("compare",
                     Experiment("policies/sjf_vs_fcfs.yaml") +
                         " --policies fcfs,sjf,srpt,lof,priority:preemptive=true,mlfq,vtc",
                     "policies");
  ExpectSameBothWays("sweep", Experiment("policies/sla_adaptive.yaml") + " -j 2", "sla_sweep");
  const std::string azure = std::string(SERVELAB_SHARED_DATA) + "/traces/azure2023_conv.csv";
  if (std::filesystem::exists(azure)) {
    ExpectSameBothWays("run", Experiment("azure_conv.yaml"), "azure_conv");
  } else {
    std::cout << "[ NOTE ] " << azure << " is absent: azure_conv not compared\n";
  }
}

// A random experiment over the keys that decide whether and how long runs last: the
// policy, batching, slots, KV pressure (preemption, swap), block size, chunking, the cost
// model, replicas and routing, clients, SLA control, load.
std::string RandomExperiment(std::mt19937_64& rng, int index) {
  auto pick = [&rng](std::initializer_list<const char*> options) {
    std::vector<const char*> v(options);
    return std::string(v[rng() % v.size()]);
  };
  auto uniform = [&rng](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  std::ostringstream y;
  y << "name: random_" << index << "\nseed: " << uniform(1, 1000) << "\n";
  // DeepSeek-V3's latent attention at TP 2 or 4 is compute-bound in decode: its runs take
  // the cost model's whole-plan path.
  y << "model: " << pick({"llama-2-7b", "llama-3-8b", "mixtral-8x7b", "deepseek-v3"}) << "\n";
  const std::string pp = pick({"1", "1", "1", "2"});
  y << "hardware: {gpu: " << pick({"a100-80gb", "h100-80gb"}) << ", tensor_parallel: "
    << pick({"2", "4"}) << ", pipeline_parallel: " << pp << ", num_gpu_blocks: "
    << uniform(300, 3000) << ", swap_space_gib: 4}\n";
  y << "cluster: {replicas: " << pick({"1", "1", "1", "2", "3"}) << ", router: "
    << pick({"round_robin", "least_loaded"}) << "}\n";
  const std::string batching = pick({"continuous", "continuous", "continuous", "static"});
  // (A pipeline keeps batches in flight: static batching is refused with one.)
  y << "scheduler:\n  batching: " << (pp == "1" ? batching : "continuous")
    << "\n  policy: "
    << pick({"fcfs", "sjf", "srpt", "lof", "vtc", "mlfq", "priority",
             "{name: priority, preemptive: true}", "{name: priority, aging_s: 2}",
             "{name: sjf, preemptive: true}"})
    << "\n  max_num_seqs: " << uniform(2, 64)
    << "\n  max_num_batched_tokens: " << pick({"2048", "4096", "8192"})
    << "\n  chunked_prefill: " << pick({"true", "false"})
    << "\n  block_size: " << pick({"8", "16", "32"})
    << "\n  preemption: " << pick({"recompute", "swap"}) << "\n";
  if (rng() % 6 == 0) y << "  sla_control: {target_ms: 30, metric: tpot_p95}\n";
  if (rng() % 6 == 0) y << "  prefix_cache: {type: hash}\n";
  y << "cost_model: "
    << pick({"{type: roofline}", "{type: roofline}", "{type: linear, per_context_token_ms: 0.0001}",
             "{type: constant, step_ms: 7}"})
    << "\n";
  y << "workload:\n  num_requests: " << uniform(20, 150) << "\n  arrival: "
    << pick({"{process: poisson, rate: ", "{process: gamma, cv: 2, rate: "}) << uniform(1, 40)
    << "}\n"
    << "  input_tokens: {dist: uniform, min: 1, max: " << uniform(10, 2000) << "}\n"
    << "  output_tokens: {dist: " << pick({"uniform, min: 1, max: 400", "fixed, value: 64",
                                          "lognormal, mean: 150, cv: 1, max: 800"})
    << "}\n";
  if (rng() % 3 == 0) {
    y << "  clients:\n    - {name: a, share: 1, priority: 0, weight: 1}\n"
         "    - {name: b, share: 2, priority: 1, weight: 2}\n";
  }
  y << "slo: {ttft_ms: 500, tpot_ms: 50}\n";
  return y.str();
}

TEST_F(DecodeRunsTest, RandomConfigsGiveTheSameFolders) {
  std::mt19937_64 rng(2026);
  for (int i = 0; i < 40; ++i) {
    const std::string yaml = RandomExperiment(rng, i);
    SCOPED_TRACE(yaml);
    const auto path = Write("random_" + std::to_string(i) + ".yaml", yaml);
    ExpectSameBothWays("run", path.string(), "random_" + std::to_string(i));
  }
}

}  // namespace
}  // namespace servelab
