#pragma once
// The weights of a Llama / Mistral / Qwen2 checkpoint as Hugging Face names and shapes
// them. Linear layers are [out_features, in_features] (y = x W^T + b); q/k/v biases exist
// when spec.attention_bias, an o_proj bias when o_proj_bias (llama); lm_head.weight is
// absent when the embeddings are tied.
#include <vector>

#include "engine/model_config.h"
#include "engine/safetensors_writer.h"

namespace servelab {

// In model order: model.embed_tokens.weight [V, h]; per layer i, model.layers.{i}.
//   self_attn.q_proj.weight [heads*d, h] (.bias [heads*d])
//   self_attn.k_proj.weight [kv*d, h]    (.bias [kv*d])
//   self_attn.v_proj.weight [kv*d, h]    (.bias [kv*d])
//   self_attn.o_proj.weight [h, heads*d] (.bias [h], llama with attention_bias)
//   mlp.gate_proj.weight [I, h], mlp.up_proj.weight [I, h], mlp.down_proj.weight [h, I]
//   input_layernorm.weight [h], post_attention_layernorm.weight [h]
// then model.norm.weight [h] and lm_head.weight [V, h] unless tied. Every entry has `dtype`.
std::vector<TensorSpec> HfWeightLayout(const ModelConfig& config, DType dtype);

}  // namespace servelab
