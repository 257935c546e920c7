#pragma once
// The weights of a Llama / Mistral / Qwen2 / Mixtral / Qwen2-MoE checkpoint as Hugging
// Face names and shapes
// them: the one table of those names. Linear layers are [out_features, in_features]
// (y = x W^T + b); q/k/v biases exist when spec.attention_bias, an o_proj bias when
// o_proj_bias (llama); lm_head.weight is absent when the embeddings are tied.
//
// Everything else (the float32 loader, the CUDA runner's uploads, the random-model
// writer) goes by each tensor's role, never by its name.
#include <cstdint>
#include <vector>

#include "engine/model_config.h"
#include "engine/safetensors_writer.h"

namespace servelab {

// What a tensor is, whatever the checkpoint calls it.
enum class WeightRole : uint8_t {
  kEmbedTokens, kFinalNorm, kLmHead,  // model-level
  kQProj, kKProj, kVProj, kOProj,     // per layer from here on
  kQBias, kKBias, kVBias, kOBias,
  kGateProj, kUpProj, kDownProj,
  kInputNorm, kPostAttentionNorm,
  // Mixture-of-experts layers (in place of gate/up/down): the router, each routed
  // expert's three projections, the shared expert's and its sigmoid gate (Qwen2-MoE).
  kRouter,
  kExpertGateProj, kExpertUpProj, kExpertDownProj,
  kSharedGateProj, kSharedUpProj, kSharedDownProj,
  kSharedExpertGate,
};

struct WeightTensor {
  TensorSpec spec;     // the Hugging Face name and shape, in the dtype asked for
  WeightRole role;
  int32_t layer = -1;   // the layer of a per-layer role; -1 for model-level ones
  int32_t expert = -1;  // the routed expert of a kExpert* role; -1 otherwise
};

// In model order: model.embed_tokens.weight [V, h]; per layer i, model.layers.{i}.
//   self_attn.q_proj.weight [heads*d, h] (.bias [heads*d])
//   self_attn.k_proj.weight [kv*d, h]    (.bias [kv*d])
//   self_attn.v_proj.weight [kv*d, h]    (.bias [kv*d])
//   self_attn.o_proj.weight [h, heads*d] (.bias [h], llama with attention_bias)
//   mlp.gate_proj.weight [I, h], mlp.up_proj.weight [I, h], mlp.down_proj.weight [h, I]
//     or, mixtral (E experts of width I):
//   block_sparse_moe.gate.weight [E, h]; block_sparse_moe.experts.{j}.w1.weight [I, h]
//     (gate), .w3.weight [I, h] (up), .w2.weight [h, I] (down)
//     or, qwen2_moe (E experts of width M = moe_intermediate_size, a shared one of S):
//   mlp.gate.weight [E, h]; mlp.experts.{j}.{gate,up}_proj.weight [M, h], .down_proj [h, M];
//   mlp.shared_expert.{gate,up}_proj.weight [S, h], .down_proj.weight [h, S];
//   mlp.shared_expert_gate.weight [1, h]
//   input_layernorm.weight [h], post_attention_layernorm.weight [h]
// then model.norm.weight [h] and lm_head.weight [V, h] unless tied. Every entry has `dtype`.
std::vector<WeightTensor> HfWeights(const ModelConfig& config, DType dtype);
// The same, names and shapes only (for writing a checkpoint).
std::vector<TensorSpec> HfWeightLayout(const ModelConfig& config, DType dtype);

}  // namespace servelab
