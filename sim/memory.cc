#include "sim/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/status.h"
#include "core/text.h"

namespace servelab {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double Gib(double bytes) { return bytes / kBytesPerGib; }

std::string Format(const char* format, auto... args) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

}  // namespace

int32_t KvHeadsPerGpu(const ModelSpec& model, int32_t tensor_parallel) {
  return static_cast<int32_t>(
      std::max<int64_t>(1, CeilDiv(model.num_key_value_heads, tensor_parallel)));
}

double KvBytesPerTokenPerGpu(const ModelSpec& model, DType kv_dtype, int32_t tensor_parallel,
                             int32_t pipeline_parallel) {
  const int64_t layers = CeilDiv(model.num_hidden_layers, pipeline_parallel);
  // MLA's latent serves every head: each GPU of the TP group caches all of it.
  if (model.IsMla()) {
    return static_cast<double>(layers) * static_cast<double>(model.KvLatentDim()) *
           DTypeBytes(kv_dtype);
  }
  return 2.0 * static_cast<double>(layers) * KvHeadsPerGpu(model, tensor_parallel) *
         model.HeadDim() * DTypeBytes(kv_dtype);
}

MemoryEstimate EstimateMemory(const ModelSpec& model, const GpuSpec& gpu,
                              const MemoryOptions& options) {
  const int32_t tp = options.tensor_parallel;
  const int32_t pp = options.pipeline_parallel;
  SERVELAB_CHECK(tp >= 1 && pp >= 1 && options.block_size >= 1);
  SERVELAB_CHECK(model.hidden_size > 0 && model.num_hidden_layers > 0);

  MemoryEstimate e;
  e.total = gpu.memory_gib * kBytesPerGib;
  e.budget = e.total * options.memory_utilization;
  e.weights = static_cast<double>(model.NumParams()) * DTypeBytes(options.weight_dtype) /
              (static_cast<double>(tp) * pp);

  // Peak activations of the largest forward pass (see the header for the formula).
  const double h = model.hidden_size;
  const double attention_block =
      model.IsMla() ? 2.0 * model.QDim() / tp + 2.0 * static_cast<double>(model.KvLatentDim())
                    : (2.0 * model.QDim() + 2.0 * model.KvDim()) / tp;
  // The MLP's widest intermediate, per token: a dense layer's, or a MoE layer's experts
  // for that token (each token is a row of each of its experts) and the shared expert.
  const double moe_width = model.IsMoe() ? double(model.num_experts_per_tok) * model.ExpertWidth() +
                                               model.shared_expert_intermediate_size
                                         : 0.0;
  const double mlp_width = model.IsMoe() ? std::max(model.NumDenseLayers() > 0 ? double(model.intermediate_size) : 0.0, moe_width)
                                         : double(model.intermediate_size);
  const double mlp_block = 3.0 * mlp_width / tp;
  const double per_token = 2.0 * h + std::max(attention_block, mlp_block);
  const double logits = static_cast<double>(options.max_num_seqs) * model.vocab_size / tp *
                        DTypeBytes(DType::kFp32);
  e.activations = static_cast<double>(options.max_num_batched_tokens) * per_token *
                      DTypeBytes(options.activation_dtype) +
                  logits;
  e.overhead = options.framework_overhead_gib * kBytesPerGib;
  e.kv_cache = e.budget - e.weights - e.activations - e.overhead;

  e.kv_bytes_per_token_per_gpu = KvBytesPerTokenPerGpu(model, options.kv_dtype, tp, pp);
  const double block_bytes = e.kv_bytes_per_token_per_gpu * options.block_size;
  e.kv_blocks = e.kv_cache > 0 ? static_cast<int64_t>(std::floor(e.kv_cache / block_bytes)) : 0;
  e.kv_tokens = e.kv_blocks * options.block_size;
  e.fits = e.kv_blocks >= 1;
  e.shortfall = e.fits ? 0.0 : block_bytes - e.kv_cache;
  e.context_len =
      options.context_len > 0 ? options.context_len : model.max_position_embeddings;
  e.concurrent_seqs =
      e.context_len > 0 ? static_cast<double>(e.kv_tokens) / e.context_len : 0.0;
  return e;
}

std::string FormatMemoryReport(const ModelSpec& model, const GpuSpec& gpu,
                               const MemoryOptions& options, const MemoryEstimate& e) {
  std::string out;
  out += model.name + " on " + gpu.name +
         Format(" (TP=%d, PP=%d; weights %s, KV %s, activations %s)\n",
                options.tensor_parallel, options.pipeline_parallel,
                std::string(DTypeName(options.weight_dtype)).c_str(),
                std::string(DTypeName(options.kv_dtype)).c_str(),
                std::string(DTypeName(options.activation_dtype)).c_str());
  if (model.IsMoe()) {
    out += Format("  mixture of experts: %d experts a layer, %d per token; %.2f B parameters "
                  "resident, %.2f B active per token\n",
                  model.num_experts, model.num_experts_per_tok,
                  static_cast<double>(model.NumParams()) * 1e-9,
                  static_cast<double>(model.NumActiveParams()) * 1e-9);
  }
  if (model.IsMla()) {
    out += Format("  latent attention: %lld cached per token a layer (kv_lora_rank %d + RoPE key "
                  "%d), every GPU of a TP group holding all of it\n",
                  static_cast<long long>(model.KvLatentDim()), model.kv_lora_rank,
                  model.qk_rope_head_dim);
  }
  out += Format("  %-28s %10s\n", "per GPU", "GiB");
  out += Format("  %-28s %10.2f\n", "device memory", Gib(e.total));
  out += Format("  %-28s %10.2f\n",
                Format("budget (x %.2f utilization)", options.memory_utilization).c_str(),
                Gib(e.budget));
  out += Format("  %-28s %10.2f\n", "- weights", Gib(e.weights));
  out += Format("  %-28s %10.2f\n",
                Format("- activations (%d tokens)", options.max_num_batched_tokens).c_str(),
                Gib(e.activations));
  out += Format("  %-28s %10.2f\n", "- framework overhead", Gib(e.overhead));
  out += Format("  %-28s %10.2f\n", "= KV cache", Gib(e.kv_cache));
  if (e.fits) {
    out += "fits: yes\n";
  } else {
    out += Format("fits: no (short by %.2f GiB per GPU to hold one KV block)\n",
                  Gib(e.shortfall));
  }
  out += Format("KV per token per GPU: %.4f MiB\n",
                e.kv_bytes_per_token_per_gpu / (1024.0 * 1024.0));
  out += "KV tokens: " + WithCommas(e.kv_tokens) + " in " + WithCommas(e.kv_blocks) +
         Format(" blocks of %d\n", options.block_size);
  out += "concurrent sequences at " + WithCommas(e.context_len) +
         Format(" tokens: %.1f\n", e.concurrent_seqs);
  return out;
}

}  // namespace servelab
