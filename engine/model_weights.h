#pragma once
// A model folder's weights as float32, converted once at load (F16 / BF16 checkpoints
// are decoded here, never per step). Linear layers keep Hugging Face's [out, in]
// orientation, row-major, so a projection of hidden states x [T, in] is x * W^T [T, out].
//
// Loading validates before use: every tensor HfWeightLayout(config) names must exist
// with exactly that shape; a failure names the tensor, the file that should hold it and
// both shapes. Tensors the layout does not name (a redundant lm_head.weight next to tied
// embeddings, rotary caches) are ignored.
#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"

namespace servelab {

struct WeightTensor;  // engine/weight_layout.h

// Row-major like the checkpoint and the kernels' activations.
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A SwiGLU MLP: gate and up stacked (rows [0, W) gate, [W, 2W) up), so one GEMM yields
// the packed [T, 2W] rows SiluAndMul reads (gate first); then down.
struct SwiGluWeights {
  RowMatrix gate_up_proj;  // [2 * W, h]
  RowMatrix down_proj;     // [h, W]
};

struct LayerWeights {
  RowMatrix q_proj;  // [heads * d, h]
  RowMatrix k_proj;  // [kv_heads * d, h]
  RowMatrix v_proj;  // [kv_heads * d, h]
  RowMatrix o_proj;  // [h, heads * d]
  // Empty unless the model has them (Qwen2: q/k/v; Llama with attention_bias: all four).
  Eigen::RowVectorXf q_bias, k_bias, v_bias, o_bias;
  SwiGluWeights mlp;                       // the dense MLP, width I; empty in a MoE layer
  // A MoE layer (Mixtral, Qwen2-MoE) in place of the dense MLP: the router, E experts of
  // width spec.ExpertWidth(), and (Qwen2-MoE) a shared expert of width
  // shared_expert_intermediate_size scaled by sigmoid(x . shared_expert_gate).
  RowMatrix router;                        // [E, h]
  std::vector<SwiGluWeights> experts;      // E of them
  SwiGluWeights shared_expert;             // empty without one
  Eigen::RowVectorXf shared_expert_gate;   // [h]; empty without a shared expert
  std::vector<float> input_norm;           // [h]
  std::vector<float> post_attention_norm;  // [h]
};

struct ModelWeights {
  ModelConfig config;
  RowMatrix embed_tokens;  // [V, h]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [h]
  RowMatrix lm_head;              // [V, h]; empty when the embeddings are tied

  // The LM head: lm_head, or embed_tokens when tied.
  const RowMatrix& LmHead() const {
    return config.spec.tie_word_embeddings ? embed_tokens : lm_head;
  }
  // Sizes every buffer for `config` (zeros), which it keeps.
  void Allocate(const ModelConfig& config);
  // Where the checkpoint tensor `t` (weight_layout.h) lives here, by its role: gate and up
  // are the two halves of a gate_up_proj (the dense MLP's, an expert's, the shared one's). REQUIRES: Allocate(config) with t from
  // HfWeights(config, ...).
  std::span<float> Of(const WeightTensor& t);
  std::span<const float> Of(const WeightTensor& t) const;
  // Floats held (what the conversion cost in memory: 4 bytes each).
  int64_t NumFloats() const;
};

// Reads the weights `config` describes from an opened checkpoint.
StatusOr<ModelWeights> LoadModelWeights(const ModelConfig& config, const SafetensorsFile& file);
// Reads `dir`/config.json and the checkpoint beside it (single file or sharded).
StatusOr<ModelWeights> LoadModelWeights(const std::filesystem::path& dir);

}  // namespace servelab
