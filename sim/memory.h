#pragma once
// How a replica's GPU memory divides between weights, activations, framework overhead
// and the KV cache: the formula a vLLM-style engine applies at startup, per GPU.
//
//   budget      = memory_gib * 2^30 * memory_utilization
//   weights     = NumParams * bytes(weight_dtype) / (tp * pp)
//   activations = T * a * (2*h + max((2*q + 2*kv) / tp, 3*I / tp))   peak of one layer
//               + S * (V / tp) * 4                                    fp32 logits
//   overhead    = framework_overhead_gib * 2^30        (CUDA context, graphs, allocator)
//   kv_cache    = budget - weights - activations - overhead          (may be negative)
// with T = max_num_batched_tokens, S = max_num_seqs, a = bytes(activation_dtype),
// h = hidden, q = query dim, kv = KV dim, I = MLP width, V = vocab. The activation term
// is the profile run's peak: the residual stream and the normed input ([T, h] each) stay
// live while either the attention block (q/k/v out + attention out, [T, 2q + 2kv] / tp)
// or the MLP block (gate|up out + SiLU*mul out, [T, 3I] / tp) runs, whichever is larger;
// plus the LM head's fp32 logits for one row per sequence. With pp > 1 every stage runs
// T tokens and the last one also holds the logits: this is the worst GPU's figure.
//
// KV per token per GPU = 2 * ceil(L / pp) * kv_heads_per_gpu * head_dim * bytes(kv),
// kv_heads_per_gpu = max(1, ceil(num_kv_heads / tp)): when tp exceeds the KV heads, each
// GPU keeps a replica of one head. Every GPU holds its share of every token, so the
// replica's token capacity is the per-GPU KV bytes over the per-GPU bytes per token,
// rounded down to whole blocks.
#include <cstdint>
#include <string>

#include "core/model_spec.h"
#include "driver/gpu_spec.h"

namespace servelab {

inline constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

struct MemoryOptions {
  int32_t tensor_parallel = 1;    // GPUs splitting each layer, >= 1
  int32_t pipeline_parallel = 1;  // stages splitting the layers, >= 1
  DType weight_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  DType activation_dtype = DType::kBf16;
  double memory_utilization = 0.9;     // fraction of device memory the engine may use
  double framework_overhead_gib = 1.0;  // per GPU: CUDA context, CUDA graphs, allocator
  int32_t max_num_batched_tokens = 8192;  // tokens in the largest forward pass
  int32_t max_num_seqs = 256;             // rows of logits in the largest step
  int32_t block_size = 16;                // tokens per KV block
  int32_t context_len = 0;  // for "concurrent sequences at context"; 0 = model window
};

// All sizes per GPU, in bytes, unless named otherwise.
struct MemoryEstimate {
  double total = 0;        // device memory
  double budget = 0;       // total * memory_utilization
  double weights = 0;
  double activations = 0;
  double overhead = 0;
  double kv_cache = 0;     // budget - weights - activations - overhead; may be negative
  bool fits = false;       // the KV cache holds at least one block
  double shortfall = 0;    // when !fits: bytes missing to hold one block; else 0
  double kv_bytes_per_token_per_gpu = 0;
  int64_t kv_tokens = 0;   // tokens the replica's KV cache holds (kv_blocks * block_size)
  int64_t kv_blocks = 0;   // whole blocks, >= 0
  double concurrent_seqs = 0;  // kv_tokens / context_len
  int32_t context_len = 0;     // the context the line above assumes
};

// KV heads each GPU stores under tensor parallelism: max(1, ceil(num_kv_heads / tp)).
int32_t KvHeadsPerGpu(const ModelSpec& model, int32_t tensor_parallel);
// 2 * ceil(L / pp) * KvHeadsPerGpu * head_dim * bytes(kv_dtype): K and V of one token on
// the GPU holding the most layers. MLA: ceil(L / pp) * (kv_lora_rank + qk_rope_head_dim)
// * bytes, whatever the tp (every GPU caches the whole latent, as vLLM does).
double KvBytesPerTokenPerGpu(const ModelSpec& model, DType kv_dtype, int32_t tensor_parallel,
                             int32_t pipeline_parallel);

// REQUIRES: model and gpu have positive sizes; options' counts >= 1.
MemoryEstimate EstimateMemory(const ModelSpec& model, const GpuSpec& gpu,
                              const MemoryOptions& options);

// The text `servelab memory` prints: a GiB table per GPU, whether it fits (and by how
// much it misses), KV tokens and blocks, and concurrent sequences at the context.
std::string FormatMemoryReport(const ModelSpec& model, const GpuSpec& gpu,
                               const MemoryOptions& options, const MemoryEstimate& estimate);

}  // namespace servelab
