// The CUDA engine's step time for Llama-3-8B (random bf16 weights generated on the device,
// so no checkpoint is needed), against the memory floor of each step, on one GPU:
//
//   decode: batch 1, 16, 64, 256 x context 1k, 4k; one new token per sequence, greedy
//           sampling on the device, CUDA graphs on. The step is timed as the engine runs
//           it (host packing, one upload, graph replay, synchronize, ids back). Floor =
//           (weight bytes read + every sequence's KV bytes) / the device-to-device copy
//           bandwidth measured in the same run (bytes read + written per second); the
//           untied embedding table counts only the rows gathered.
//   prefill: 2,048-token prompts, 1 and 4 per step; achieved TFLOP/s counting the GEMMs
//           (2 x non-embedding parameters x tokens + the LM head for the emitting rows)
//           and causal attention (4 x layers x heads x head_dim x attended positions),
//           against 790 TFLOP/s (a dense bf16 GEMM measured on this GPU model).
//
// Contexts whose KV exceeds the pool reuse blocks modulo the pool (the bytes read are the
// same; the table notes it). KV content is whatever the fresh pool holds.
//   usage: cuda_engine_benchmark [results.csv]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/cuda/cuda_model_runner.h"
#include "engine/token_store.h"

namespace {

using servelab::BlockCopy;
using servelab::CudaModelRunner;
using servelab::CudaRunnerOptions;
using servelab::ModelConfig;
using servelab::Request;
using servelab::SamplingParams;
using servelab::ScheduledRequest;
using servelab::StepPlan;
using servelab::TokenStore;

constexpr double kPeakTflops = 790.0;

// Llama-3-8B's config.json (meta-llama/Meta-Llama-3-8B), the architecture only.
ModelConfig Llama3_8B() {
  ModelConfig c;
  c.spec.name = "llama-3-8b";
  c.spec.hidden_size = 4096;
  c.spec.num_hidden_layers = 32;
  c.spec.num_attention_heads = 32;
  c.spec.num_key_value_heads = 8;
  c.spec.head_dim = 128;
  c.spec.intermediate_size = 14336;
  c.spec.vocab_size = 128256;
  c.spec.max_position_embeddings = 8192;
  c.spec.rms_norm_eps = 1e-5;
  c.spec.rope_theta = 500000.0;
  c.eos_token_ids = {128001};
  return c;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "cuda_engine_benchmark: %s\n", what.c_str());
  std::exit(1);
}

// Device-to-device copy: GB/s counting bytes read plus bytes written, median of 10.
double CopyBandwidthGbs() {
  const size_t bytes = size_t{2} << 30;
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) {
    Die("cudaMalloc for the copy benchmark");
  }
  cudaMemset(src, 1, bytes);
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(begin);
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(end);
    cudaEventSynchronize(end);
    float t = 0;
    cudaEventElapsedTime(&t, begin, end);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaFree(src);
  cudaFree(dst);
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Batch {
  std::vector<Request> requests;
  TokenStore tokens;
  StepPlan plan;
};

// `batch` sequences of `context` tokens each, all cached but the last `new_tokens`, which
// this step computes; every sequence emits. Blocks are distinct until the pool runs out,
// then reused modulo the pool.
void MakeBatch(Batch& b, int32_t batch, int32_t context, int32_t new_tokens, int32_t block_size,
               int32_t pool_blocks, int32_t vocab, bool* aliased) {
  b.requests.assign(static_cast<size_t>(batch), Request());
  b.plan = StepPlan();
  const int32_t blocks = (context + block_size - 1) / block_size;
  int64_t next = 0;
  *aliased = int64_t{batch} * blocks > pool_blocks;
  for (int32_t i = 0; i < batch; ++i) {
    Request& r = b.requests[static_cast<size_t>(i)];
    r.id = i;
    r.prompt_len = context;
    r.target_output_len = 1 << 20;
    for (int32_t j = 0; j < blocks; ++j) {
      r.block_table.push_back(static_cast<int32_t>(next++ % pool_blocks));
    }
    std::vector<int32_t> ids(static_cast<size_t>(context));
    for (int32_t t = 0; t < context; ++t) ids[t] = (t * 7919 + i * 104729) % vocab;
    b.tokens.AddPrompt(r.id, std::move(ids));
    b.plan.seqs.push_back(ScheduledRequest{&r, new_tokens, context - new_tokens, true, false});
  }
  b.plan.num_emitting = batch;
}

// Median wall time of `reps` greedy steps of `b.plan` after `warmup` untimed ones (graphs
// were captured when the runner was made), each as the engine runs it: pack, upload,
// forward (or graph replay), sample, synchronize, ids back.
double MedianStepMs(CudaModelRunner& runner, Batch& b, int warmup, int reps) {
  const SamplingParams greedy;
  const std::vector<double> uniforms(b.requests.size(), 0.5);
  std::vector<int32_t> ids;
  std::vector<double> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const servelab::Status s = runner.ExecuteAndSample(b.plan, b.tokens, greedy, uniforms, ids);
    const auto stop = std::chrono::steady_clock::now();
    if (!s.ok()) Die(s.message());
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  return Median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  FILE* csv = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (argc > 1 && csv == nullptr) Die(std::string("cannot write ") + argv[1]);
  std::string why;
  if (!servelab::CudaDeviceUsable(&why)) Die(why);

  const double copy_gbs = CopyBandwidthGbs();
  const ModelConfig config = Llama3_8B();
  CudaRunnerOptions options;
  options.block_size = 16;
  options.max_num_seqs = 256;
  options.max_num_batched_tokens = 8192;
  options.memory_utilization = 0.9;
  options.cuda_graphs = true;
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  const auto made_at = std::chrono::steady_clock::now();
  auto made = CudaModelRunner::CreateRandom(config, 1234, 0.02, options);
  const double made_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - made_at).count();
  cudaMemGetInfo(&free_after, &total);
  if (!made.ok()) Die(made.status().message());
  CudaModelRunner& runner = **made;
  const auto capacity = runner.Capacity();
  const double weight_gb = static_cast<double>(runner.WeightBytes()) / 1e9;
  std::printf("device %s; copy %.0f GB/s (read + write); Llama-3-8B bf16 weights %.2f GB; "
              "KV pool %d blocks of %d tokens (%.1f GB), %lld KV bytes per token\n",
              runner.DeviceName().c_str(), copy_gbs, weight_gb, capacity.num_gpu_blocks,
              capacity.block_size,
              static_cast<double>(capacity.num_gpu_blocks) * capacity.bytes_per_block / 1e9,
              static_cast<long long>(runner.KvBytesPerToken()));
  // What capturing the decode graphs cost: the runner holds 256 MiB back for it.
  std::printf("runner made in %.1f s with %d decode graphs; device memory free %.2f GB before, "
              "%.2f GB after (of %.2f GB)\n",
              made_s, runner.NumCapturedGraphs(), free_before / 1e9, free_after / 1e9, total / 1e9);
  if (csv != nullptr) {
    std::fprintf(csv, "kind,batch,context,tokens,ms,floor_ms,ratio_to_floor,tflops,"
                      "fraction_of_peak,graph,aliased_kv\n");
  }

  // Decode.
  std::printf("\n%-7s %6s %8s %10s %10s %8s %6s %8s\n", "decode", "batch", "context", "step ms",
              "floor ms", "x floor", "graph", "<=1.3x?");
  for (const int32_t context : {1024, 4096}) {
    for (const int32_t batch : {1, 16, 64, 256}) {
      Batch b;
      bool aliased = false;
      MakeBatch(b, batch, context, 1, capacity.block_size, capacity.num_gpu_blocks,
                config.spec.vocab_size, &aliased);
      const double step = MedianStepMs(runner, b, 3, 20);
      const double kv_bytes = static_cast<double>(batch) * context * runner.KvBytesPerToken();
      // A step reads every weight once, except the (untied) embedding table, of which it
      // gathers one row per sequence.
      const double embedding = 2.0 * config.spec.vocab_size * config.spec.hidden_size;
      const double weights = static_cast<double>(runner.WeightBytes()) -
                             (config.spec.tie_word_embeddings ? 0.0 : embedding) +
                             2.0 * batch * config.spec.hidden_size;
      const double floor = (weights + kv_bytes) / (copy_gbs * 1e9) * 1e3;
      const bool graph = runner.LastDecodeGraph().has_value();
      // The target holds for batch <= 64.
      const char* verdict = batch > 64 ? "" : step <= 1.3 * floor ? "yes" : "NO";
      std::printf("%-7s %6d %8d %10.3f %10.3f %8.2f %6s %8s%s\n", "", batch, context, step, floor,
                  step / floor, graph ? "yes" : "no", verdict,
                  aliased ? "  (KV blocks reused)" : "");
      if (csv != nullptr) {
        std::fprintf(csv, "decode,%d,%d,%d,%.4f,%.4f,%.4f,,,%d,%d\n", batch, context, batch, step,
                     floor, step / floor, graph ? 1 : 0, aliased ? 1 : 0);
      }
    }
  }

  // Prefill of whole 2,048-token prompts.
  const servelab::ModelSpec& spec = config.spec;
  const double non_embedding_params =
      static_cast<double>(spec.num_hidden_layers) *
      (static_cast<double>(spec.hidden_size) * (spec.QDim() + 2 * spec.KvDim()) +
       static_cast<double>(spec.QDim()) * spec.hidden_size +
       3.0 * spec.hidden_size * spec.intermediate_size);
  std::printf("\n%-7s %6s %8s %10s %10s %10s\n", "prefill", "prompts", "tokens", "step ms",
              "TFLOP/s", "of 790");
  for (const int32_t prompts : {1, 4}) {
    const int32_t prompt = 2048;
    Batch b;
    bool aliased = false;
    MakeBatch(b, prompts, prompt, prompt, capacity.block_size, capacity.num_gpu_blocks,
              spec.vocab_size, &aliased);
    const double step = MedianStepMs(runner, b, 2, 6);
    const double tokens = static_cast<double>(prompts) * prompt;
    const double attention = 4.0 * spec.num_hidden_layers * spec.num_attention_heads *
                             spec.HeadDim() * prompts * (double(prompt) * (prompt + 1) / 2.0);
    const double flops = 2.0 * non_embedding_params * tokens + attention +
                         2.0 * spec.vocab_size * spec.hidden_size * prompts;
    const double tflops = flops / (step * 1e-3) / 1e12;
    std::printf("%-7s %6d %8.0f %10.3f %10.1f %9.0f%%\n", "", prompts, tokens, step, tflops,
                100.0 * tflops / kPeakTflops);
    if (csv != nullptr) {
      std::fprintf(csv, "prefill,%d,%d,%.0f,%.4f,,,%.2f,%.4f,0,0\n", prompts, prompt, tokens, step,
                   tflops, tflops / kPeakTflops);
    }
  }
  if (csv != nullptr) std::fclose(csv);
  return 0;
}
