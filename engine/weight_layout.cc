#include "engine/weight_layout.h"

#include <string>

namespace servelab {

std::vector<TensorSpec> HfWeightLayout(const ModelConfig& config, DType dtype) {
  const ModelSpec& s = config.spec;
  const int64_t h = s.hidden_size, q = s.QDim(), kv = s.KvDim(), inter = s.intermediate_size;
  const int64_t vocab = s.vocab_size;
  std::vector<TensorSpec> layout;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    layout.push_back({std::move(name), dtype, std::move(shape)});
  };
  add("model.embed_tokens.weight", {vocab, h});
  for (int32_t i = 0; i < s.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::pair<const char*, int64_t> projections[] = {{"q", q}, {"k", kv}, {"v", kv}};
    for (const auto& [which, rows] : projections) {
      add(p + "self_attn." + which + "_proj.weight", {rows, h});
      if (s.attention_bias) add(p + "self_attn." + which + "_proj.bias", {rows});
    }
    add(p + "self_attn.o_proj.weight", {h, q});
    if (config.o_proj_bias) add(p + "self_attn.o_proj.bias", {h});
    add(p + "mlp.gate_proj.weight", {inter, h});
    add(p + "mlp.up_proj.weight", {inter, h});
    add(p + "mlp.down_proj.weight", {h, inter});
    add(p + "input_layernorm.weight", {h});
    add(p + "post_attention_layernorm.weight", {h});
  }
  add("model.norm.weight", {h});
  if (!s.tie_word_embeddings) add("lm_head.weight", {vocab, h});
  return layout;
}

}  // namespace servelab
