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
        const std::string x = moe + "experts." + std::to_string(e) + ".";
        add(x + "w1.weight", {width, h}, WeightRole::kExpertGateProj, i, e);
        add(x + "w2.weight", {h, width}, WeightRole::kExpertDownProj, i, e);
        add(x + "w3.weight", {width, h}, WeightRole::kExpertUpProj, i, e);
      }
    } else if (config.family == ModelFamily::kQwen2Moe) {
      add(p + "mlp.gate.weight", {s.num_experts, h}, WeightRole::kRouter, i);
      for (int32_t e = 0; e < s.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        add(x + "gate_proj.weight", {width, h}, WeightRole::kExpertGateProj, i, e);
        add(x + "up_proj.weight", {width, h}, WeightRole::kExpertUpProj, i, e);
        add(x + "down_proj.weight", {h, width}, WeightRole::kExpertDownProj, i, e);
      }
      add(p + "mlp.shared_expert.gate_proj.weight", {shared, h}, WeightRole::kSharedGateProj, i);
      add(p + "mlp.shared_expert.up_proj.weight", {shared, h}, WeightRole::kSharedUpProj, i);
      add(p + "mlp.shared_expert.down_proj.weight", {h, shared}, WeightRole::kSharedDownProj, i);
      add(p + "mlp.shared_expert_gate.weight", {1, h}, WeightRole::kSharedExpertGate, i);
    } else {
      add(p + "mlp.gate_proj.weight", {inter, h}, WeightRole::kGateProj, i);
      add(p + "mlp.up_proj.weight", {inter, h}, WeightRole::kUpProj, i);
      add(p + "mlp.down_proj.weight", {h, inter}, WeightRole::kDownProj, i);
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
