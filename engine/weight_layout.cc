#include "engine/weight_layout.h"

#include <string>

namespace servelab {

std::vector<WeightTensor> HfWeights(const ModelConfig& config, DType dtype) {
  const ModelSpec& s = config.spec;
  const int64_t h = s.hidden_size, q = s.QDim(), kv = s.KvDim(), inter = s.intermediate_size;
  const int64_t vocab = s.vocab_size;
  std::vector<WeightTensor> layout;
  auto add = [&](std::string name, std::vector<int64_t> shape, WeightRole role, int32_t layer,
                 int32_t expert = -1) {
    layout.push_back({{std::move(name), dtype, std::move(shape)}, role, layer, expert});
  };
  const int64_t width = s.ExpertWidth(), shared = s.shared_expert_intermediate_size;
  // A SwiGLU MLP's three projections: gate [W, h], up [W, h], down [h, W].
  struct Names {
    const char *gate, *up, *down;
  };
  struct Roles {
    WeightRole gate, up, down;
  };
  static constexpr Names kHfNames{"gate_proj", "up_proj", "down_proj"};
  static constexpr Names kMixtralNames{"w1", "w3", "w2"};
  static constexpr Roles kDenseRoles{WeightRole::kGateProj, WeightRole::kUpProj,
                                     WeightRole::kDownProj};
  static constexpr Roles kExpertRoles{WeightRole::kExpertGateProj, WeightRole::kExpertUpProj,
                                      WeightRole::kExpertDownProj};
  static constexpr Roles kSharedRoles{WeightRole::kSharedGateProj, WeightRole::kSharedUpProj,
                                      WeightRole::kSharedDownProj};
  auto swiglu = [&](const std::string& prefix, const Names& names, int64_t w, const Roles& roles,
                    int32_t layer, int32_t expert) {
    add(prefix + names.gate + ".weight", {w, h}, roles.gate, layer, expert);
    add(prefix + names.up + ".weight", {w, h}, roles.up, layer, expert);
    add(prefix + names.down + ".weight", {h, w}, roles.down, layer, expert);
  };
  add("model.embed_tokens.weight", {vocab, h}, WeightRole::kEmbedTokens, -1);
  for (int32_t i = 0; i < s.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    struct Projection {
      const char* which;
      int64_t rows;
      WeightRole weight, bias;
    };
    const Projection projections[] = {{"q", q, WeightRole::kQProj, WeightRole::kQBias},
                                      {"k", kv, WeightRole::kKProj, WeightRole::kKBias},
                                      {"v", kv, WeightRole::kVProj, WeightRole::kVBias}};
    for (const Projection& x : projections) {
      add(p + "self_attn." + x.which + "_proj.weight", {x.rows, h}, x.weight, i);
      if (s.attention_bias) add(p + "self_attn." + x.which + "_proj.bias", {x.rows}, x.bias, i);
    }
    add(p + "self_attn.o_proj.weight", {h, q}, WeightRole::kOProj, i);
    if (config.o_proj_bias) add(p + "self_attn.o_proj.bias", {h}, WeightRole::kOBias, i);
    if (config.family == ModelFamily::kMixtral) {
      const std::string moe = p + "block_sparse_moe.";
      add(moe + "gate.weight", {s.num_experts, h}, WeightRole::kRouter, i);
      for (int32_t e = 0; e < s.num_experts; ++e) {
        swiglu(moe + "experts." + std::to_string(e) + ".", kMixtralNames, width, kExpertRoles, i, e);
      }
    } else if (config.family == ModelFamily::kQwen2Moe) {
      add(p + "mlp.gate.weight", {s.num_experts, h}, WeightRole::kRouter, i);
      for (int32_t e = 0; e < s.num_experts; ++e) {
        swiglu(p + "mlp.experts." + std::to_string(e) + ".", kHfNames, width, kExpertRoles, i, e);
      }
      swiglu(p + "mlp.shared_expert.", kHfNames, shared, kSharedRoles, i, -1);
      add(p + "mlp.shared_expert_gate.weight", {1, h}, WeightRole::kSharedExpertGate, i);
    } else {
      swiglu(p + "mlp.", kHfNames, inter, kDenseRoles, i, -1);
    }
    add(p + "input_layernorm.weight", {h}, WeightRole::kInputNorm, i);
    add(p + "post_attention_layernorm.weight", {h}, WeightRole::kPostAttentionNorm, i);
  }
  add("model.norm.weight", {h}, WeightRole::kFinalNorm, -1);
  if (!s.tie_word_embeddings) add("lm_head.weight", {vocab, h}, WeightRole::kLmHead, -1);
  return layout;
}

std::vector<TensorSpec> HfWeightLayout(const ModelConfig& config, DType dtype) {
  std::vector<TensorSpec> specs;
  for (WeightTensor& t : HfWeights(config, dtype)) specs.push_back(std::move(t.spec));
  return specs;
}

}  // namespace servelab
