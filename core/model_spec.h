#pragma once
// The architecture of a decoder-only transformer (Llama, Mistral, Qwen2 families; MoE:
// Mixtral, Qwen3 MoE, DeepSeek-V3 with its latent attention), in Hugging Face
// config.json terms. The cost model, the memory formula and the engine all
// read it; none of them needs more.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/fields.h"

namespace servelab {

enum class DType : uint8_t { kFp32, kFp16, kBf16, kFp8, kInt8, kInt4 };
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);  // "fp32", "bf16", "int4", ...
double DTypeBytes(DType dtype);                          // int4 = 0.5

struct ModelSpec {
  std::string name;                    // catalog name, e.g. "llama-2-7b"
  int32_t hidden_size = 0;             // h
  int32_t num_hidden_layers = 0;       // L
  int32_t num_attention_heads = 0;     // query heads
  int32_t num_key_value_heads = 0;     // KV heads (GQA when < query heads)
  int32_t head_dim = 0;                // 0 in a config means hidden_size / heads
  int32_t intermediate_size = 0;       // SwiGLU MLP width
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 0;  // the context window
  bool tie_word_embeddings = false;    // LM head shares the embedding matrix
  bool attention_bias = false;         // Qwen2: biases on q/k/v projections
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // Mixture of experts (num_experts 0 = a dense SwiGLU MLP in every layer). Each MoE
  // layer has a router ([h, E]) that sends every token to num_experts_per_tok of its
  // num_experts SwiGLU experts, each of width moe_intermediate_size (0 = intermediate_size,
  // as Mixtral's config.json has it), plus an always-on shared expert of width
  // shared_expert_intermediate_size (0 = none; Qwen2-MoE). The first first_k_dense_replace
  // layers keep a dense MLP of width intermediate_size (DeepSeek). config.json names:
  // num_experts (Qwen), num_local_experts (Mixtral), n_routed_experts (DeepSeek).
  int32_t num_experts = 0;
  int32_t num_experts_per_tok = 0;
  int32_t moe_intermediate_size = 0;
  int32_t shared_expert_intermediate_size = 0;
  int32_t first_k_dense_replace = 0;
  // Multi-head latent attention (DeepSeek-V2/V3; kv_lora_rank 0 = ordinary attention).
  // Each token caches one latent of kv_lora_rank plus a shared RoPE key of
  // qk_rope_head_dim per layer, for all heads together; queries are low-rank through
  // q_lora_rank (0 = a direct projection); each head's query and key have
  // qk_nope_head_dim + qk_rope_head_dim dimensions and its value v_head_dim. Decode
  // attends in the latent space (the up-projections absorbed into the query and the
  // output), as vLLM and SGLang run it.
  int32_t kv_lora_rank = 0;
  int32_t q_lora_rank = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;
  int32_t v_head_dim = 0;

  bool IsMla() const { return kv_lora_rank > 0; }
  // MLA: the cached latent and RoPE key of one token, one layer.
  int64_t KvLatentDim() const { return int64_t{kv_lora_rank} + qk_rope_head_dim; }
  // A query head's width (MLA: qk_nope_head_dim + qk_rope_head_dim).
  int32_t HeadDim() const {
    if (IsMla()) return qk_nope_head_dim + qk_rope_head_dim;
    return head_dim > 0 ? head_dim : hidden_size / num_attention_heads;
  }
  bool IsMoe() const { return num_experts > 0; }
  int32_t NumMoeLayers() const { return IsMoe() ? num_hidden_layers - first_k_dense_replace : 0; }
  int32_t NumDenseLayers() const { return num_hidden_layers - NumMoeLayers(); }
  int32_t ExpertWidth() const {
    return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size;
  }
  // Query width over all heads (MLA: each head qk_nope_head_dim + qk_rope_head_dim), and
  // the attention output's (MLA: v_head_dim per head).
  int64_t QDim() const { return int64_t{num_attention_heads} * HeadDim(); }
  int64_t OutDim() const { return IsMla() ? int64_t{num_attention_heads} * v_head_dim : QDim(); }
  // K (or V) width over the KV heads; not used for MLA, whose cache is KvLatentDim().
  int64_t KvDim() const { return int64_t{num_key_value_heads} * HeadDim(); }
  // Custom models in YAML use the config.json key names.
  template <class V>
  void VisitFields(V& v) {
    v.Field("name", name);
    // Every size bounded so that parameter counts and KV bytes stay exact in int64 (the
    // largest models served have hidden 16384, 126 layers, 128 heads, vocab 256K).
    v.Field("hidden_size", hidden_size, Bounds{1, 1 << 20});
    v.Field("num_hidden_layers", num_hidden_layers, Bounds{1, 1 << 14});
    v.Field("num_attention_heads", num_attention_heads, Bounds{1, 1 << 14});
    v.Field("num_key_value_heads", num_key_value_heads, Bounds{1, 1 << 14});
    v.Field("head_dim", head_dim, Bounds{0, 1 << 14});
    v.Field("intermediate_size", intermediate_size, Bounds{1, 1 << 22});
    v.Field("vocab_size", vocab_size, Bounds{1, 1 << 24});
    v.Field("max_position_embeddings", max_position_embeddings, Bounds{1, 1 << 26});
    v.Field("tie_word_embeddings", tie_word_embeddings);
    v.Field("attention_bias", attention_bias);
    v.Field("rms_norm_eps", rms_norm_eps, kPositive);
    v.Field("rope_theta", rope_theta, kPositive);
    v.Field("num_experts", num_experts, Bounds{0, 1 << 12});
    v.Field("num_experts_per_tok", num_experts_per_tok, Bounds{0, 1 << 12});
    v.Field("moe_intermediate_size", moe_intermediate_size, Bounds{0, 1 << 22});
    v.Field("shared_expert_intermediate_size", shared_expert_intermediate_size, Bounds{0, 1 << 22});
    v.Field("first_k_dense_replace", first_k_dense_replace, Bounds{0, 1 << 14});
    v.Field("kv_lora_rank", kv_lora_rank, Bounds{0, 1 << 16});
    v.Field("q_lora_rank", q_lora_rank, Bounds{0, 1 << 16});
    v.Field("qk_nope_head_dim", qk_nope_head_dim, Bounds{0, 1 << 14});
    v.Field("qk_rope_head_dim", qk_rope_head_dim, Bounds{0, 1 << 14});
    v.Field("v_head_dim", v_head_dim, Bounds{0, 1 << 14});
  }

  // Parameters of one decoder layer's attention: q/k/v/o projections (+ q/k/v biases) and
  // the two RMSNorm weight vectors. MLA: the query down- and up-projections (or the direct
  // one) with the q_a norm, the latent down-projection (to kv_lora_rank + RoPE key) with
  // its norm, the latent up-projection to every head's key and value, the output.
  int64_t AttentionParamsPerLayer() const;
  // Of one dense layer's SwiGLU MLP (gate, up, down) and of one MoE layer's: the router,
  // every expert, the shared expert; `active`: only the experts one token uses.
  int64_t DenseMlpParams() const;
  int64_t MoeMlpParams(bool active) const;
  // Parameters of one dense decoder layer: attention plus the dense MLP.
  int64_t ParamsPerLayer() const;
  // All parameters: embedding, layers (every expert), final norm, an untied LM head.
  int64_t NumParams() const;
  // Those one token's forward pass uses: as NumParams, with num_experts_per_tok experts
  // per MoE layer (Mixtral-8x7B: 12.9 B of 46.7 B).
  int64_t NumActiveParams() const;
  // Elements one token keeps in the cache per layer, before any parallel split: K and V,
  // 2 * KvDim(); MLA: its latent and RoPE key, KvLatentDim(). The one KV size formula;
  // the others scale it.
  int64_t KvElementsPerTokenPerLayer() const { return IsMla() ? KvLatentDim() : 2 * KvDim(); }
  int64_t KvElementsPerToken() const {
    return int64_t{num_hidden_layers} * KvElementsPerTokenPerLayer();
  }
  // Bytes of one KV block of `block_size` tokens at `bytes_per_element`, all layers.
  int64_t KvBytesPerBlock(int32_t block_size, int64_t bytes_per_element) const {
    return KvElementsPerToken() * block_size * bytes_per_element;
  }
  // KV cache bytes per token over all layers (K and V), before any parallel split.
  double KvBytesPerToken(DType kv_dtype) const;
};

}  // namespace servelab
