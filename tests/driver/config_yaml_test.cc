#include "driver/config_yaml.h"
#include "driver/model_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "driver/experiment.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

constexpr const char* kMinimal = R"(name: t
model: llama-2-7b
hardware: {gpu: a100-80gb}
workload:
  num_requests: 10
)";

std::string ErrorOf(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  auto config = ParseExperiment(yaml, "exp.yaml", "/data", sets);
  if (config.ok()) return "(parsed fine)";
  EXPECT_TRUE(config.status().IsBadInput());
  return config.status().message();
}

// "Billion laughs": nine levels of ten aliases would expand to 10^10 nodes; the walk
// stops at a million and names the file, the line and the key.
TEST(ConfigYamlTest, NestedAliasesAreBounded) {
  std::string yaml = std::string(kMinimal) + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    const std::string name = std::to_string(i);
    yaml += 'a';
    yaml += name + ": &a" + name + " [";
    for (int k = 0; k < 10; ++k) yaml += (k ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  const std::string error = ErrorOf(yaml);
  EXPECT_THAT(error, HasSubstr("exp.yaml:"));
  EXPECT_THAT(error, HasSubstr("more than 1000000 YAML nodes"));
  // A few aliases are fine (and then an unknown key, as any other).
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "a0: &a0 [x]\na1: [*a0, *a0]\n"),
              HasSubstr("unknown key 'a0'"));
}

// Every numeric key has a range that keeps the computation inside its types: values past
// it are errors naming the key and the range, at parse time (they aborted, wrapped to 0,
// or overflowed a step's time before).
TEST(ConfigYamlTest, NumbersPastTheirTypeAreOutOfRange) {
  const struct {
    const char* set;
    const char* range;
  } cases[] = {
      {"hardware.num_gpu_blocks=2147483648", "hardware.num_gpu_blocks: value 2147483648 out of range: must be in [0, 16777216]"},
      {"hardware.num_gpu_blocks=4294967296", "must be in [0, 16777216]"},
      {"hardware.swap_space_gib=1e30", "hardware.swap_space_gib: value 1e30 out of range"},
      {"hardware.gpu={base: a100-80gb, mem_bandwidth_gbps: 1e-300}", "hardware.gpu.mem_bandwidth_gbps: value 1e-300 out of range"},
      {"model={base: llama-2-7b, hidden_size: 2147483647}", "model.hidden_size: value 2147483647 out of range: must be in [1, 1048576]"},
      {"workload.duration_s=1e12", "workload.duration_s: value 1e12 out of range: must be in [0, 1000000000]"},
      {"workload.arrival.rate=1e-12", "workload.arrival.rate: value 1e-12 out of range"},
      {"workload.arrival.rate=1e30", "workload.arrival.rate: value 1e30 out of range"},
      {"workload.num_requests=99999999999", "workload.num_requests: value 99999999999 out of range"},
      {"engine={model_path: m, kv_cache_gib: 1e30}", "engine.kv_cache_gib: value 1e30 out of range"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(ErrorOf(kMinimal, {c.set}), HasSubstr(c.range)) << c.set;
  }
}

// A second YAML document would be ignored, and a string-tagged or quoted number is text:
// both are errors naming the line and key.
TEST(ConfigYamlTest, SecondDocumentsAndTaggedStringsAreRefused) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "---\nname: other\n"),
              HasSubstr("exp.yaml:6: a second YAML document"));
  EXPECT_THAT(ErrorOf("--- {name: x}\n--- {name: y}\n"), HasSubstr("exp.yaml:2: a second YAML document"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "...\nname: other\n"),
              HasSubstr("exp.yaml:7: a second YAML document"));
  // A leading '---' and a final '...' are one document; "," (which makes yaml-cpp's
  // LoadAll loop forever, a fuzzer finding) is an ordinary error.
  EXPECT_TRUE(ParseExperiment("# c\n---\n" + std::string(kMinimal) + "...\n# end\n", "exp.yaml", "/").ok());
  EXPECT_NE(ErrorOf(","), "(parsed fine)");
  // A --set value's own duplicate keys (a fuzzer finding: both were kept, and the
  // resolved config then failed to parse).
  EXPECT_THAT(ErrorOf(kMinimal, {"cost_model={type: roofline, gemm_efficiency: 0.4, gemm_efficiency: 0.5}"}),
              HasSubstr("cost_model.gemm_efficiency: duplicate key"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "scheduler: {max_num_seqs: !!str 256}\n"),
              HasSubstr("scheduler.max_num_seqs"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "scheduler: {max_num_seqs: '256'}\n"),
              HasSubstr("scheduler.max_num_seqs"));
  auto tagged = ParseExperiment(std::string(kMinimal) + "scheduler: {max_num_seqs: !!int 64}\n",
                                "exp.yaml", "/data");
  ASSERT_TRUE(tagged.ok()) << tagged.status().message();
  EXPECT_EQ(tagged->scheduler.max_num_seqs, 64);
}

// A resolved config always parses again, to the same resolved config -- for every shipped
// experiment, as the simulator would run it (backend: sim; engine experiments keep their
// engine section), and with an engine section left empty (its model_path unset).
TEST(ConfigYamlTest, EveryResolvedConfigParsesAgainToItself) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(SERVELAB_SOURCE_DIR) + "/experiments")) {
    // experiments/results/ keeps what device runs brought back (model files, resolved
    // configs), not experiments.
    const bool result = e.path().string().find("/experiments/results/") != std::string::npos;
    if (e.path().extension() == ".yaml" && !result) files.push_back(e.path().string());
  }
  ASSERT_GT(files.size(), 15u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto first = LoadExperiment(file, {"backend=sim"});
    ASSERT_TRUE(first.ok()) << first.status().message();
    const std::string resolved = EmitResolvedConfig(*first);
    auto again = ParseExperiment(resolved, "config.resolved.yaml", "/");
    ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << resolved;
    EXPECT_EQ(EmitResolvedConfig(*again), resolved);
  }
}

TEST(ConfigYamlTest, MinimalConfigGetsDocumentedDefaults) {
  auto c = ParseExperiment(kMinimal, "exp.yaml", "/data");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model.name, "llama-2-7b");
  EXPECT_EQ(c->model.hidden_size, 4096);
  EXPECT_EQ(c->hardware.gpu.name, "a100-80gb");
  EXPECT_EQ(c->scheduler.max_num_seqs, 256);
  EXPECT_EQ(c->scheduler.max_num_batched_tokens, 8192);
  EXPECT_EQ(c->scheduler.policy.name, "fcfs");
  EXPECT_DOUBLE_EQ(c->hardware.memory_utilization, 0.9);
  EXPECT_EQ(c->output.dir, "results/t");
  EXPECT_EQ(c->workload.num_requests, 10);
}

TEST(ConfigYamlTest, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "scheduler:\n  max_num_seq: 4\n"),
            "exp.yaml:7: scheduler.max_num_seq: unknown key 'max_num_seq' (did you mean "
            "'max_num_seqs'?); valid keys here: batching, policy, max_num_seqs, "
            "max_num_batched_tokens, chunked_prefill, block_size, preemption, watermark, "
            "max_model_len, sla_control, prefix_cache");
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "sceduler: {}\n"),
              HasSubstr("exp.yaml:6: sceduler: unknown key 'sceduler' (did you mean 'scheduler'?)"));
}

TEST(ConfigYamlTest, WrongTypeNamesKeyAndLine) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "scheduler:\n  chunked_prefill: true\n  max_num_seqs: many\n"),
            "exp.yaml:8: scheduler.max_num_seqs: expected an integer, got 'many'");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "slo: {ttft_ms: [1, 2]}\n"),
            "exp.yaml:6: slo.ttft_ms: expected a single value, got a list");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "seed: \"7\"\n"),
            "exp.yaml:6: seed: expected an integer, got '7'");
}

TEST(ConfigYamlTest, DuplicateKeyIsAnError) {
  EXPECT_EQ(ErrorOf("name: a\nmodel: llama-2-7b\nname: b\n"),
            "exp.yaml:3: name: duplicate key (first given at line 1)");
}

TEST(ConfigYamlTest, OutOfRangeValueSaysTheRange) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "hardware: {gpu: a100-80gb, memory_utilization: 1.5}\n"),
            "exp.yaml:6: hardware: duplicate key (first given at line 3)")
      << "hardware twice";
  const std::string yaml = "model: llama-2-7b\nhardware:\n  gpu: a100-80gb\n  memory_utilization: 1.5\n";
  EXPECT_EQ(ErrorOf(yaml),
            "exp.yaml:4: hardware.memory_utilization: value 1.5 out of range: must be in (0, 1]");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "scheduler: {max_num_seqs: 0}\n"),
            "exp.yaml:6: scheduler.max_num_seqs: value 0 out of range: must be in [1, 1048576]");
}

TEST(ConfigYamlTest, EnumsAndCatalogNamesListTheValidValues) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "scheduler: {batching: dynamic}\n"),
            "exp.yaml:6: scheduler.batching: 'dynamic' is not one of: continuous, static");
  EXPECT_THAT(ErrorOf("model: llama-2-8b\n"),
              HasSubstr("exp.yaml:1: model: Unable to find model 'llama-2-8b' (did you mean "
                        "'llama-2-7b'?). Valid values are: "));
  EXPECT_THAT(ErrorOf("model: llama-2-7b\n"), HasSubstr("hardware.gpu: missing required key 'gpu'"));
}

TEST(ConfigYamlTest, SyntaxErrorNamesLineAndColumn) {
  EXPECT_THAT(ErrorOf("name: [unclosed\nmodel: x\n"), HasSubstr("exp.yaml:"));
  EXPECT_THAT(ErrorOf("name: [unclosed\nmodel: x\n"), HasSubstr("YAML syntax error"));
}

TEST(ConfigYamlTest, SetOverridesAnyKey) {
  auto c = ParseExperiment(kMinimal, "exp.yaml", "/data",
                           {"scheduler.max_num_seqs=64", "scheduler.policy={name: fcfs}",
                            "workload.arrival.rate=2.5", "model=llama-3-8b"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->scheduler.max_num_seqs, 64);
  EXPECT_DOUBLE_EQ(c->workload.arrival.rate, 2.5);
  EXPECT_EQ(c->model.name, "llama-3-8b");
  EXPECT_EQ(ErrorOf(kMinimal, {"scheduler.max_num_seqs=lots"}),
            "--set scheduler.max_num_seqs: scheduler.max_num_seqs: expected an integer, got 'lots'");
  EXPECT_THAT(ErrorOf(kMinimal, {"scheduler.max_num_sqs=3"}),
              HasSubstr("--set scheduler.max_num_sqs: scheduler.max_num_sqs: unknown key"));
  EXPECT_EQ(ErrorOf(kMinimal, {"noequals"}), "--set noequals: expected key.path=value");
}

TEST(ConfigYamlTest, SetReachesIntoLists) {
  const std::string yaml = std::string(kMinimal) +
                           "  clients:\n    - {name: a, share: 1}\n    - {name: b, share: 1}\n";
  auto c = ParseExperiment(yaml, "exp.yaml", "/data", {"workload.clients.1.share=3"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->workload.clients.size(), 2u);
  EXPECT_DOUBLE_EQ(c->workload.clients[1].share, 3.0);
  EXPECT_THAT(ErrorOf(yaml, {"workload.clients.2.share=3"}), HasSubstr("past the end"));
}

TEST(ConfigYamlTest, RelativePathsResolveAgainstTheExperimentFolder) {
  const std::string yaml = std::string(kMinimal) + "  trace: {path: ../traces/t.csv, format: azure}\n";
  auto c = ParseExperiment(yaml, "exp.yaml", "/data/experiments");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->workload.has_trace);
  EXPECT_EQ(c->workload.trace.path, "/data/traces/t.csv");
}

// A cost model is a named extension: its parameters reach its registry as written,
// with where each came from (the registry, sim/cost_model.h, knows which exist).
TEST(ConfigYamlTest, CostModelIsATypeAndItsParameters) {
  auto c = ParseExperiment(std::string(kMinimal) + "cost_model: {type: linear, base_ms: 3}\n",
                           "exp.yaml", "/");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cost_model.name, "linear");
  ASSERT_EQ(c->cost_model.params.size(), 1u);
  EXPECT_EQ(c->cost_model.params[0].key, "base_ms");
  EXPECT_EQ(c->cost_model.params[0].value, "3");
  EXPECT_THAT(c->cost_model.params[0].where, HasSubstr("exp.yaml:"));
  auto defaulted = ParseExperiment(kMinimal, "exp.yaml", "/");
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->cost_model.name, "roofline");
  // Without a type it stays the roofline: its parameters can be set alone.
  auto tuned = ParseExperiment(kMinimal, "exp.yaml", "/", {"cost_model.gemm_efficiency=0.6"});
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_EQ(tuned->cost_model.name, "roofline");
  ASSERT_EQ(tuned->cost_model.params.size(), 1u);
  EXPECT_EQ(tuned->cost_model.params[0].where, "--set cost_model.gemm_efficiency");
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "cost_model: {type: constant, step_ms: [3]}\n"),
              HasSubstr("cost_model.step_ms: expected a single value"));
}

TEST(ConfigYamlTest, CustomModelFromABase) {
  auto c = ParseExperiment(
      "model: {base: llama-2-7b, name: tiny, num_hidden_layers: 2}\nhardware: {gpu: a10}\n",
      "exp.yaml", "/");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model.name, "tiny");
  EXPECT_EQ(c->model.num_hidden_layers, 2);
  EXPECT_EQ(c->model.hidden_size, 4096);
  EXPECT_THAT(ErrorOf("model: {name: x, hidden_size: 64}\nhardware: {gpu: a10}\n"),
              HasSubstr("model: missing required key 'num_hidden_layers'"));
}

TEST(ConfigYamlTest, ResolvedConfigParsesBackToTheSameBytes) {
  const std::string yaml = std::string(kMinimal) +
                           "  input_tokens: {dist: lognormal, mean: 500, cv: 1}\n"
                           "  clients: [{name: a, share: 0.3}, {name: b, share: 0.7, priority: 1}]\n"
                           "slo: {ttft_ms: 1000}\n"
                           "cost_model: {type: roofline, gemm_efficiency: 0.6}\n";
  auto first = ParseExperiment(yaml, "exp.yaml", "/data");
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string emitted = EmitResolvedConfig(*first);
  auto second = ParseExperiment(emitted, "config.resolved.yaml", "/data");
  ASSERT_TRUE(second.ok()) << second.status().message() << "\n" << emitted;
  EXPECT_EQ(EmitResolvedConfig(*second), emitted);
  EXPECT_THAT(emitted, HasSubstr("max_num_seqs: 256"));
  EXPECT_THAT(emitted, HasSubstr("gemm_efficiency: 0.6"));
}

TEST(ExperimentTest, UnknownPolicyIsBadInputNamingTheKey) {
  auto c = ParseExperiment(std::string(kMinimal) + "scheduler: {policy: sjff}\n", "exp.yaml", "/");
  ASSERT_TRUE(c.ok());
  auto p = PrepareExperiment(*c);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("exp.yaml:6: scheduler.policy: Unable to find policy 'sjff'"));
}

TEST(ExperimentTest, TensorParallelMustDivideHeads) {
  auto c = ParseExperiment(std::string(kMinimal), "exp.yaml", "/", {"hardware.tensor_parallel=3"});
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(PrepareExperiment(*c).status().message(),
              HasSubstr("hardware.tensor_parallel: 3 does not divide the 32 attention heads"));
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// Checks made after parsing, across keys or sections, name the file and the line of the
// key they are about, as the parser's own messages do (they named the file alone, or
// nothing).
TEST(ExperimentTest, ChecksAfterParsingNameTheKeysLine) {
  constexpr const char* kYaml = R"(name: t
model: llama-2-7b
hardware:
  gpu: a100-80gb
  tensor_parallel: 3
scheduler:
  max_num_seqs: 300
  max_num_batched_tokens: 256
workload:
  num_requests: 10
  output_tokens: {dist: uniform, min: 10, max: 5}
)";
  const auto error = [&](const std::vector<std::string>& sets) {
    auto c = ParseExperiment(kYaml, "exp.yaml", "/", sets);
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (!c.ok()) return std::string();
    auto p = PrepareExperiment(*c);
    EXPECT_TRUE(p.status().IsBadInput());
    return p.status().message();
  };
  EXPECT_THAT(error({}), HasSubstr("exp.yaml:5: hardware.tensor_parallel: 3 does not divide"));
  EXPECT_THAT(error({"hardware.tensor_parallel=1"}),
              HasSubstr("exp.yaml:8: scheduler.max_num_batched_tokens (256) must be >="));
  EXPECT_THAT(error({"hardware.tensor_parallel=1", "scheduler.max_num_seqs=8"}),
              HasSubstr("exp.yaml:11: workload.output_tokens.max: must be >= min (10), got 5"));
  // Given by --set, the location is the override.
  EXPECT_THAT(error({"hardware.tensor_parallel=1", "scheduler.max_num_seqs=8",
                     "workload.output_tokens={dist: zipf, min: 9, max: 2}"}),
              HasSubstr("--set workload.output_tokens: workload.output_tokens.max: must be >= min"));
  // A key the file does not give is labelled by its nearest given section.
  auto c = ParseExperiment(kYaml, "exp.yaml", "/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Where("workload.output_tokens.theta"), "exp.yaml:11: workload.output_tokens.theta");
  EXPECT_EQ(c->Where("scheduler.max_model_len"), "exp.yaml:6: scheduler.max_model_len");
  EXPECT_EQ(c->Where("slo.ttft_ms"), "exp.yaml: slo.ttft_ms");
  auto context = ServedContextLen(*ParseExperiment(kYaml, "exp.yaml", "/",
                                                   {"scheduler.max_model_len=5000"}),
                                  4096, "llama-2-7b");
  EXPECT_THAT(context.status().message(),
              HasSubstr("--set scheduler.max_model_len: scheduler.max_model_len: 5000 exceeds"));
  // Neither a number nor a duration: the workload section's line.
  auto no_size = ParseExperiment("name: t\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                                 "workload:\n  arrival: {rate: 2}\n",
                                 "exp.yaml", "/");
  ASSERT_TRUE(no_size.ok());
  EXPECT_THAT(PrepareExperiment(*no_size).status().message(),
              HasSubstr("exp.yaml:4: workload: set num_requests or duration_s"));
}

TEST(KeyLocationsTest, LocatesOnlyMessagesThatStartWithAKey) {
  KeyLocations where("exp.yaml");
  where.Record("workload", "exp.yaml:9");
  where.Record("workload.clients[1]", "exp.yaml:14");
  const std::vector<std::string> roots = {"workload", "scheduler"};
  EXPECT_EQ(where.Locate(InvalidArgument("workload.clients[1].rate: must be > 0"), roots).message(),
            "exp.yaml:14: workload.clients[1].rate: must be > 0");
  EXPECT_EQ(where.Locate(InvalidArgument("scheduler.policy: no"), roots).message(),
            "exp.yaml: scheduler.policy: no");
  // Already located, not a key, or not one of ours: unchanged.
  for (const char* m : {"/data/t.csv:3: bad", "trace: empty", "workload is empty", "model: x"}) {
    EXPECT_EQ(where.Locate(InvalidArgument(m), roots).message(), m);
  }
  EXPECT_TRUE(where.Locate(Status::Ok(), roots).ok());
  EXPECT_EQ(where.Locate(NotFound("workload: x"), roots).code(), StatusCode::kNotFound);
}

// A node made from an alias carries its anchor's position, so an alias used as a key
// would be reported at the anchor's line: it is refused where it is written.
TEST(ConfigYamlTest, AnAliasAsAKeyIsRefusedAtItsOwnLine) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "seqs: &k max_num_seqs\nscheduler:\n  *k : 64\n"),
              HasSubstr("exp.yaml:8: an alias as a key"));
  // Aliases as values stay fine, and report what is in them at the anchor's lines.
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "x: &s\n  max_num_seqs: 64\n  bogus: 1\nscheduler: *s\n"),
              HasSubstr("exp.yaml:8: scheduler.bogus: unknown key"));
}

TEST(ConfigYamlTest, ExpertSettingsMustDescribeAMixture) {
  EXPECT_THAT(ErrorOf(kMinimal, {"model={base: mixtral-8x7b, num_experts_per_tok: 9}"}),
              HasSubstr("num_experts_per_tok must be in [1, num_experts (8)], got 9"));
  EXPECT_THAT(ErrorOf(kMinimal, {"model={base: llama-2-7b, num_experts_per_tok: 2}"}),
              HasSubstr("expert settings without num_experts"));
  EXPECT_THAT(ErrorOf(kMinimal, {"model={base: mixtral-8x7b, first_k_dense_replace: 32}"}),
              HasSubstr("leaves no MoE layer of 32"));
  // The largest sizes each key allows would overflow a parameter count.
  EXPECT_THAT(ErrorOf(kMinimal, {"model={base: mixtral-8x7b, num_experts: 4096, "
                                 "moe_intermediate_size: 4194304, num_hidden_layers: 16384}"}),
              HasSubstr("more than 2^53 parameters"));
  // A DeepSeek-style mixture: dense first layers, a shared expert.
  EXPECT_EQ(ErrorOf(kMinimal, {"model={base: mixtral-8x7b, first_k_dense_replace: 1, "
                               "shared_expert_intermediate_size: 2048}"}),
            "(parsed fine)");
}

TEST(ConfigYamlTest, ACustomModelNeedsAHeadDimOfOneOrMore) {
  EXPECT_THAT(ErrorOf(kMinimal, {"model={base: llama-2-7b, hidden_size: 8}"}),
              HasSubstr("hidden_size 8 is less than num_attention_heads 32"));
  EXPECT_EQ(ErrorOf(kMinimal, {"model={base: llama-2-7b, hidden_size: 8, head_dim: 128}"}),
            "(parsed fine)");
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

TEST(ExperimentTest, ExpertParallelismSplitsTheExpertsOfTheTensorParallelGpus) {
  const auto error = [](const std::vector<std::string>& sets) {
    auto c = ParseExperiment(kMinimal, "exp.yaml", "/", sets);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? PrepareExperiment(*c).status().message() : std::string();
  };
  EXPECT_THAT(error({"hardware.tensor_parallel=2", "hardware.expert_parallel=2"}),
              HasSubstr("hardware.expert_parallel: 2, but llama-2-7b has no experts"));
  EXPECT_THAT(error({"model=mixtral-8x7b", "hardware.tensor_parallel=2", "hardware.expert_parallel=4"}),
              HasSubstr("4 must equal tensor_parallel (2)"));
  EXPECT_THAT(error({"model={base: mixtral-8x7b, num_experts: 6}", "hardware.tensor_parallel=4",
                     "hardware.expert_parallel=4"}),
              HasSubstr("4 does not divide the 6 experts"));
  EXPECT_EQ(error({"model=mixtral-8x7b", "hardware.tensor_parallel=2", "hardware.expert_parallel=2"}),
            "");
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// Found by the experiment YAML fuzzer: a uniform or zipf distribution without max parsed,
// but its resolved config (max: 0) did not. The missing bound is now the workload's
// error, and the resolved config parses to itself.
TEST(ConfigYamlTest, ADistributionWithoutItsBoundResolvesAndSaysWhatIsMissing) {
  for (const char* dist : {"zipf", "uniform"}) {
    SCOPED_TRACE(dist);
    auto c = ParseExperiment(kMinimal, "exp.yaml", "/",
                             {std::string("workload.input_tokens={dist: ") + dist + "}"});
    ASSERT_TRUE(c.ok()) << c.status().message();
    const std::string emitted = EmitResolvedConfig(*c);
    auto again = ParseExperiment(emitted, "config.resolved.yaml", "/");
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(EmitResolvedConfig(*again), emitted);
    EXPECT_THAT(PrepareExperiment(*c).status().message(),
                HasSubstr(std::string("workload.input_tokens.max: ") + dist +
                          " needs max, the upper bound"));
  }
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// Found by the experiment YAML fuzzer: a name holding carriage returns ("linear\r\r",
// from a plain scalar) was written back plain, and read back without them. Names and
// parameters that are not words are now written double-quoted, escaped.
TEST(ConfigYamlTest, NamesAndParametersThatAreNotWordsResolveByteForByte) {
  const std::string yaml = std::string(kMinimal) +
                           "cost_model: {type: linear\r\r\r, base_ms: 1}\n"
                           "scheduler: {policy: {name: priority, aging_s: \"5 \"}}\n";
  auto c = ParseExperiment(yaml, "exp.yaml", "/");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::string emitted = EmitResolvedConfig(*c);
  auto again = ParseExperiment(emitted, "config.resolved.yaml", "/");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->cost_model.name, c->cost_model.name);
  EXPECT_EQ(EmitResolvedConfig(*again), emitted);
  // Words stay plain: numbers read back as numbers.
  EXPECT_THAT(emitted, HasSubstr("base_ms: 1\n"));
  EXPECT_THAT(emitted, HasSubstr("aging_s: \"5 \""));
}

// Found this session: max_num_seqs 2,000,000,000 with a fixed KV pool passed the
// parser, and the scheduler's up-front reservation for that many requests ended in
// std::bad_alloc. Both batch limits now have ranges.
TEST(ConfigYamlTest, BatchLimitsHaveRangesThatFitAnyMachine) {
  auto seqs = ParseExperiment(std::string(kMinimal), "exp.yaml", "/",
                              {"scheduler.max_num_seqs=2000000000"});
  ASSERT_FALSE(seqs.ok());
  EXPECT_THAT(seqs.status().message(),
              HasSubstr("scheduler.max_num_seqs: value 2000000000 out of range: must be in [1, 1048576]"));
  auto tokens = ParseExperiment(std::string(kMinimal), "exp.yaml", "/",
                                {"scheduler.max_num_batched_tokens=100000000"});
  ASSERT_FALSE(tokens.ok());
  EXPECT_THAT(tokens.status().message(), HasSubstr("must be in [1, 67108864]"));
  EXPECT_TRUE(ParseExperiment(std::string(kMinimal), "exp.yaml", "/",
                              {"scheduler.max_num_seqs=1048576",
                               "scheduler.max_num_batched_tokens=67108864"})
                  .ok());
}

// A model written with DeepSeek's and Mixtral's own config.json names is the model
// written with servelab's: n_routed_experts / num_local_experts are num_experts, and
// n_shared_experts shared experts of moe_intermediate_size make the shared expert.
TEST(ConfigYamlTest, MixtureKeysUnderTheirConfigJsonNames) {
  const std::string head = "name: t\nhardware: {gpu: h200-141gb}\nworkload: {num_requests: 1}\n";
  auto deepseek = ParseExperiment(
      head +
          "model: {name: ds, hidden_size: 7168, num_hidden_layers: 61, num_attention_heads: 128,\n"
          "  num_key_value_heads: 128, intermediate_size: 18432, vocab_size: 129280,\n"
          "  max_position_embeddings: 163840, n_routed_experts: 256, num_experts_per_tok: 8,\n"
          "  moe_intermediate_size: 2048, n_shared_experts: 1, first_k_dense_replace: 3,\n"
          "  kv_lora_rank: 512, q_lora_rank: 1536, qk_nope_head_dim: 128, qk_rope_head_dim: 64,\n"
          "  v_head_dim: 128}\n",
      "exp.yaml", "/");
  ASSERT_TRUE(deepseek.ok()) << deepseek.status().message();
  const ModelSpec catalog = FindModel("deepseek-v3").value();
  EXPECT_EQ(deepseek->model.num_experts, 256);
  EXPECT_EQ(deepseek->model.shared_expert_intermediate_size, 2048);
  EXPECT_EQ(deepseek->model.NumParams(), catalog.NumParams());
  EXPECT_EQ(deepseek->model.NumActiveParams(), catalog.NumActiveParams());

  auto mixtral = ParseExperiment(head +
                                     "model: {base: llama-2-7b, num_local_experts: 8, "
                                     "num_experts_per_tok: 2}\n",
                                 "exp.yaml", "/");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status().message();
  EXPECT_EQ(mixtral->model.num_experts, 8);
  // The resolved config writes servelab's names, and reads back the same.
  const std::string emitted = EmitResolvedConfig(*mixtral);
  EXPECT_THAT(emitted, HasSubstr("num_experts: 8"));
  EXPECT_THAT(emitted, ::testing::Not(HasSubstr("num_local_experts")));

  auto conflict = ParseExperiment(head +
                                      "model: {base: llama-2-7b, num_experts: 8, "
                                      "n_routed_experts: 4, num_experts_per_tok: 2}\n",
                                  "exp.yaml", "/");
  ASSERT_FALSE(conflict.ok());
  EXPECT_THAT(conflict.status().message(),
              HasSubstr("model.n_routed_experts: 4 disagrees with num_experts 8"));
}

// Found by the experiment YAML fuzzer: a parameter name of 300 control bytes (raw) parsed, but
// the resolved config wrote it escaped (\x16, four characters each) as a key longer than
// the 1,024 characters YAML allows, so it did not parse again. No parameter has such a
// name: refused where it is given.
TEST(ConfigYamlTest, AParameterNameLongerThanAnyIsRefusedAtItsLine) {
  const std::string name(300, '\x16');
  auto c = ParseExperiment(std::string(kMinimal) + "cost_model: {type: linear, b" + name + ": 1}\n",
                           "exp.yaml", "/");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().IsBadInput());
  EXPECT_THAT(c.status().message(),
              HasSubstr("cost_model: a parameter name of 301 bytes; names are at most 128"));
  EXPECT_THAT(c.status().message(), HasSubstr("exp.yaml:"));
  EXPECT_TRUE(ParseExperiment(std::string(kMinimal) + "cost_model: {type: linear, " +
                                  std::string(128, 'k') + ": 1}\n",
                              "exp.yaml", "/")
                  .ok());
  // The fuzzer's next find: a short name of bytes YAML writes back escaped, as other
  // characters (0xC8 reads back as U+00C8, two bytes). Names are words.
  auto bytes = ParseExperiment(std::string(kMinimal) + "cost_model: {type: linear, b\xc8\xc8: 1}\n",
                               "exp.yaml", "/");
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(),
              HasSubstr("exp.yaml:6: cost_model: a parameter name holds bytes other than letters"));
  EXPECT_TRUE(ParseExperiment(std::string(kMinimal) + "cost_model: {type: linear, base_ms: 1}\n",
                              "exp.yaml", "/")
                  .ok());
}

}  // namespace
}  // namespace servelab
