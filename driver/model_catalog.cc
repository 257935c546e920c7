#include "driver/model_catalog.h"

#include <utility>

#include "core/text.h"

namespace servelab {
namespace {

// One catalog entry, in config.json terms. head_dim is 0 (= hidden / heads, 128) for the
// dense models; Qwen3's config.json sets it.
struct Arch {
  const char* name;
  int32_t hidden_size;
  int32_t num_hidden_layers;
  int32_t num_attention_heads;
  int32_t num_key_value_heads;
  int32_t intermediate_size;
  int32_t vocab_size;
  int32_t max_position_embeddings;
  bool tie_word_embeddings;
  bool attention_bias;
  double rms_norm_eps;
  double rope_theta;
  // Mixture of experts (0 = dense) and head_dim where it is not hidden / heads.
  int32_t num_experts = 0;
  int32_t num_experts_per_tok = 0;
  int32_t moe_intermediate_size = 0;  // 0: experts as wide as intermediate_size (Mixtral)
  int32_t head_dim = 0;
  // DeepSeek: the shared experts' width (n_shared_experts x moe_intermediate_size), the
  // leading dense layers, and multi-head latent attention.
  int32_t shared_expert_intermediate_size = 0;
  int32_t first_k_dense_replace = 0;
  int32_t kv_lora_rank = 0;
  int32_t q_lora_rank = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;
  int32_t v_head_dim = 0;
};

// Sources: config.json of each Hugging Face repository named below.
// Only the fields a cost or memory model needs; rope_scaling (Llama 3.1's "llama3"
// scaling, Qwen2.5's optional YaRN) changes no shape and is not modelled.
constexpr Arch kArchs[] = {
    // meta-llama/Llama-2-{7b,13b,70b}-hf: MHA for 7B/13B, GQA (8 KV heads) for 70B.
    {"llama-2-7b", 4096, 32, 32, 32, 11008, 32000, 4096, false, false, 1e-5, 10000.0},
    {"llama-2-13b", 5120, 40, 40, 40, 13824, 32000, 4096, false, false, 1e-5, 10000.0},
    {"llama-2-70b", 8192, 80, 64, 8, 28672, 32000, 4096, false, false, 1e-5, 10000.0},
    // meta-llama/Meta-Llama-3-{8B,70B}: 128K-token vocabulary, 8K window.
    {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 8192, false, false, 1e-5, 500000.0},
    {"llama-3-70b", 8192, 80, 64, 8, 28672, 128256, 8192, false, false, 1e-5, 500000.0},
    // meta-llama/Llama-3.1-{8B,70B}: Llama 3's shapes with a 128K window (llama3 rope
    // scaling, which changes no cost or memory figure).
    {"llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, 131072, false, false, 1e-5, 500000.0},
    {"llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256, 131072, false, false, 1e-5, 500000.0},
    // meta-llama/Llama-3.1-405B: 126 layers, 128K window.
    {"llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256, 131072, false, false, 1e-5,
     500000.0},
    // mistralai/Mistral-7B-v0.3: vocabulary 32768, sliding_window null (v0.1 had 4096).
    {"mistral-7b", 4096, 32, 32, 8, 14336, 32768, 32768, false, false, 1e-5, 1000000.0},
    // Qwen/Qwen2.5-{7B,14B,32B,72B}-Instruct: q/k/v biases, 152064-row embeddings.
    // max_position_embeddings 32768 is the Instruct configs' value (the base configs say
    // 131072; serving past 32768 needs YaRN rope scaling). rms_norm_eps is 1e-6 for 7B
    // and 1e-5 for the larger three.
    {"qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, 32768, false, true, 1e-6, 1000000.0},
    {"qwen2.5-14b", 5120, 48, 40, 8, 13824, 152064, 32768, false, true, 1e-5, 1000000.0},
    {"qwen2.5-32b", 5120, 64, 40, 8, 27648, 152064, 32768, false, true, 1e-5, 1000000.0},
    {"qwen2.5-72b", 8192, 80, 64, 8, 29568, 152064, 32768, false, true, 1e-5, 1000000.0},
    // Mixture of experts. mistralai/Mixtral-8x7B-v0.1: 8 experts of width 14336 in every
    // layer, 2 per token (46.7 B parameters, 12.9 B active).
    {"mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 32768, false, false, 1e-5, 1000000.0, 8, 2},
    // Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B: 128 experts of width 768 / 1536 in every
    // layer (decoder_sparse_step 1, no mlp_only_layers), 8 per token, no shared expert,
    // head_dim 128 (30.5 B / 3.3 B active; 235 B / 22 B active). intermediate_size (6144,
    // 12288) is the dense width no layer uses.
    {"qwen3-30b-a3b", 2048, 48, 32, 4, 6144, 151936, 40960, false, false, 1e-6, 1000000.0, 128, 8,
     768, 128},
    {"qwen3-235b-a22b", 4096, 94, 64, 4, 12288, 151936, 40960, false, false, 1e-6, 1000000.0, 128,
     8, 1536, 128},
    // deepseek-ai/DeepSeek-V3: 61 layers, the first 3 dense (width 18432), then 256 routed
    // experts of width 2048 (8 per token) and n_shared_experts 1 of the same width;
    // latent attention with kv_lora_rank 512, q_lora_rank 1536, 128 heads of 128 + 64
    // (RoPE) query/key and 128 value dimensions. 671 B parameters, 37 B active (the
    // paper's counts; the checkpoint's 685 B add the 14 B multi-token-prediction module,
    // which serving without speculative decoding does not run). num_key_value_heads is
    // the config's 128; latent attention caches 512 + 64 per token and layer instead.
    {"deepseek-v3", 7168, 61, 128, 128, 18432, 129280, 163840, false, false, 1e-6, 10000.0, 256,
     8, 2048, 0, 2048, 3, 512, 1536, 128, 64, 128},
};

std::vector<ModelSpec> BuildCatalog() {
  std::vector<ModelSpec> models;
  for (const Arch& a : kArchs) {
    ModelSpec m;
    m.name = a.name;
    m.hidden_size = a.hidden_size;
    m.num_hidden_layers = a.num_hidden_layers;
    m.num_attention_heads = a.num_attention_heads;
    m.num_key_value_heads = a.num_key_value_heads;
    m.intermediate_size = a.intermediate_size;
    m.vocab_size = a.vocab_size;
    m.max_position_embeddings = a.max_position_embeddings;
    m.tie_word_embeddings = a.tie_word_embeddings;
    m.attention_bias = a.attention_bias;
    m.rms_norm_eps = a.rms_norm_eps;
    m.rope_theta = a.rope_theta;
    m.num_experts = a.num_experts;
    m.num_experts_per_tok = a.num_experts_per_tok;
    m.moe_intermediate_size = a.moe_intermediate_size;
    m.head_dim = a.head_dim;
    m.shared_expert_intermediate_size = a.shared_expert_intermediate_size;
    m.first_k_dense_replace = a.first_k_dense_replace;
    m.kv_lora_rank = a.kv_lora_rank;
    m.q_lora_rank = a.q_lora_rank;
    m.qk_nope_head_dim = a.qk_nope_head_dim;
    m.qk_rope_head_dim = a.qk_rope_head_dim;
    m.v_head_dim = a.v_head_dim;
    models.push_back(std::move(m));
  }
  return models;
}

}  // namespace

const std::vector<ModelSpec>& ModelCatalog() {
  static const std::vector<ModelSpec> catalog = BuildCatalog();
  return catalog;
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelSpec& model : ModelCatalog()) names.push_back(model.name);
  return names;
}

StatusOr<ModelSpec> FindModel(std::string_view name) {
  for (const ModelSpec& model : ModelCatalog()) {
    if (model.name == name) return model;
  }
  return NotFound(UnknownNameMessage("model", name, ModelNames()));
}

}  // namespace servelab
