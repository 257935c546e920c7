// CPU reference engine throughput on a ~20M-parameter random Llama (4 layers, hidden 512,
// 8 heads, 4 KV heads, intermediate 1536, vocab 8000), one thread: prefill of 512-token
// prompts and decode at context 512, batch 1 and 32. Counter tokens_per_s counts the
// tokens the step computed (prompt tokens for prefill, one per sequence for decode).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <numeric>

#include "engine/cpu_model_runner.h"
#include "engine/model_weights.h"
#include "engine/random_model.h"

namespace servelab {
namespace {

constexpr int32_t kContext = 512;
constexpr int32_t kBlockSize = 16;

ModelConfig BenchConfig() {
  ModelConfig c;
  c.spec.name = "bench-20m";
  c.spec.hidden_size = 512;
  c.spec.num_hidden_layers = 4;
  c.spec.num_attention_heads = 8;
  c.spec.num_key_value_heads = 4;
  c.spec.intermediate_size = 1536;
  c.spec.vocab_size = 8000;
  c.spec.max_position_embeddings = 4096;
  c.spec.rms_norm_eps = 1e-5;
  return c;
}

// Written once into a temporary folder, loaded, the folder removed.
std::shared_ptr<const ModelWeights> Weights() {
  static const std::shared_ptr<const ModelWeights> weights = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("servelab_engine_benchmark_" + std::to_string(::getpid()));
    RandomModelOptions options;
    options.config = BenchConfig();
    options.seed = 1;
    StatusOr<WrittenModel> written = WriteRandomModel(options, dir);
    SERVELAB_CHECK_MSG(written.ok(), written.status().message());
    StatusOr<ModelWeights> loaded = LoadModelWeights(dir);
    SERVELAB_CHECK_MSG(loaded.ok(), loaded.status().message());
    std::filesystem::remove_all(dir);
    return std::make_shared<const ModelWeights>(std::move(*loaded));
  }();
  return weights;
}

// `batch` requests of kContext + 1 ids each, with disjoint block tables.
struct Batch {
  std::unique_ptr<CpuModelRunner> runner;
  TokenStore tokens;
  std::vector<Request> requests;
};

Batch MakeBatch(int32_t batch) {
  Batch b;
  CpuRunnerOptions options;
  options.block_size = kBlockSize;
  const int32_t blocks_per_seq = (kContext + 1 + kBlockSize - 1) / kBlockSize;
  options.num_blocks = batch * blocks_per_seq;
  auto runner = CpuModelRunner::Create(Weights(), options);
  SERVELAB_CHECK_MSG(runner.ok(), runner.status().message());
  b.runner = std::move(*runner);
  b.requests.resize(static_cast<size_t>(batch));
  for (int32_t i = 0; i < batch; ++i) {
    Request& r = b.requests[static_cast<size_t>(i)];
    r.id = i;
    r.prompt_len = kContext;
    r.block_table.resize(static_cast<size_t>(blocks_per_seq));
    std::iota(r.block_table.begin(), r.block_table.end(), i * blocks_per_seq);
    b.tokens.AddPrompt(i, SyntheticPrompt(7, i, kContext + 1, 8000));
  }
  return b;
}

StepPlan Plan(Batch& b, int32_t computed, int32_t num_new) {
  StepPlan plan;
  for (Request& r : b.requests) {
    plan.seqs.push_back(ScheduledRequest{&r, num_new, computed, true, false});
  }
  plan.num_emitting = static_cast<int32_t>(plan.seqs.size());
  return plan;
}

void Run(benchmark::State& state, Batch& b, const StepPlan& plan, int64_t tokens_per_step) {
  std::vector<float> logits;
  for (auto _ : state) {
    const Status status = b.runner->Execute(plan, b.tokens, logits);
    if (!status.ok()) state.SkipWithError(status.message().c_str());
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(tokens_per_step * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["params_M"] = static_cast<double>(Weights()->NumFloats()) / 1e6;
}

// Every sequence prefills its whole kContext-token prompt in one step.
void BM_CpuPrefill(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  Batch b = MakeBatch(batch);
  const StepPlan plan = Plan(b, 0, kContext);
  Run(state, b, plan, int64_t{batch} * kContext);
}

// Every sequence decodes its token at position kContext (the same slot each iteration).
void BM_CpuDecode(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  Batch b = MakeBatch(batch);
  std::vector<float> logits;
  SERVELAB_CHECK(b.runner->Execute(Plan(b, 0, kContext), b.tokens, logits).ok());
  const StepPlan plan = Plan(b, kContext, 1);
  Run(state, b, plan, batch);
}

BENCHMARK(BM_CpuPrefill)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CpuDecode)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace servelab

BENCHMARK_MAIN();
