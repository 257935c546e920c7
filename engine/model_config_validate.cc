// ValidateModelConfig (the consistency rules every ModelConfig obeys, whether read from
// config.json or built in code) and ModelConfigJson (which writes only valid ones).
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <type_traits>

#include "engine/model_config.h"

namespace servelab {
namespace {

Status KeyError(const std::string& source, const std::string& key, const std::string& what) {
  return InvalidArgument(source + ": key '" + key + "': " + what);
}

// ModelSpec's own bounds (those a model in an experiment YAML obeys), applied to the sizes
// a config.json gave: they keep parameter and KV counts exact in int64.
struct SpecBounds {
  const std::string& source;
  Status status;
  template <class T>
  void Field(const char* key, const T& value, Bounds bounds = {}) {
    if constexpr (std::is_arithmetic_v<T>) {
      if (status.ok() && !bounds.Contains(static_cast<double>(value))) {
        std::ostringstream text;
        text << value << " is out of range: must be " << bounds.Describe();
        status = KeyError(source, key, text.str());
      }
    }
  }
};

// The expert settings a family has (model_config.h), and none of DeepSeek's (first dense
// layers, latent attention), which the engine does not run.
Status ValidateExperts(const ModelConfig& config, const std::string& source) {
  const ModelSpec& s = config.spec;
  if (s.IsMla()) return KeyError(source, "kv_lora_rank", "latent attention is not supported");
  if (s.first_k_dense_replace != 0) {
    return KeyError(source, "first_k_dense_replace", "dense layers among the experts are not "
                                                     "supported");
  }
  if (!IsMoeFamily(config.family)) {
    if (s.IsMoe() || s.num_experts_per_tok != 0 || s.moe_intermediate_size != 0 ||
        s.shared_expert_intermediate_size != 0) {
      return KeyError(source, "num_experts", "a " + std::string(ModelTypeName(config.family)) +
                                                 " model has no experts");
    }
    return Status::Ok();
  }
  const bool mixtral = config.family == ModelFamily::kMixtral;
  const char* experts_key = mixtral ? "num_local_experts" : "num_experts";
  if (!s.IsMoe()) return KeyError(source, experts_key, "expected a positive integer");
  if (s.num_experts_per_tok < 1) {
    return KeyError(source, "num_experts_per_tok", "expected a positive integer");
  }
  if (s.num_experts_per_tok > s.num_experts) {
    return KeyError(source, "num_experts_per_tok",
                    std::to_string(s.num_experts_per_tok) + " exceeds " + experts_key + " " +
                        std::to_string(s.num_experts));
  }
  if (mixtral) {
    if (s.moe_intermediate_size != 0 || s.shared_expert_intermediate_size != 0) {
      return KeyError(source, "moe_intermediate_size", "mixtral's experts are "
                                                       "intermediate_size wide, none shared");
    }
    if (!config.norm_topk_prob) {
      return KeyError(source, "norm_topk_prob", "mixtral always renormalises its routing");
    }
    return Status::Ok();
  }
  if (s.moe_intermediate_size < 1) {
    return KeyError(source, "moe_intermediate_size", "expected a positive integer");
  }
  if (s.shared_expert_intermediate_size < 1) {
    return KeyError(source, "shared_expert_intermediate_size", "expected a positive integer");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateModelConfig(const ModelConfig& config, const std::string& source) {
  const ModelSpec& s = config.spec;
  const std::pair<const char*, int32_t> positive[] = {
      {"hidden_size", s.hidden_size},
      {"num_attention_heads", s.num_attention_heads},
      {"num_key_value_heads", s.num_key_value_heads},
      {"intermediate_size", s.intermediate_size},
      {"num_hidden_layers", s.num_hidden_layers},
      {"vocab_size", s.vocab_size},
      {"max_position_embeddings", s.max_position_embeddings}};
  for (const auto& [key, value] : positive) {
    if (value < 1) return KeyError(source, key, "expected a positive integer, got " + std::to_string(value));
  }
  SpecBounds bounds{source, Status::Ok()};
  ModelSpec(s).VisitFields(bounds);
  SERVELAB_RETURN_IF_ERROR(bounds.status);
  if (s.head_dim < 0) return KeyError(source, "head_dim", "expected a positive integer");
  if (s.head_dim == 0 && s.hidden_size % s.num_attention_heads != 0) {
    return KeyError(source, "hidden_size",
                    std::to_string(s.hidden_size) + " is not divisible by num_attention_heads " +
                        std::to_string(s.num_attention_heads) + " (and head_dim is not given)");
  }
  if (s.HeadDim() % 2 != 0) {
    return KeyError(source, s.head_dim > 0 ? "head_dim" : "hidden_size",
                    "the head dimension " + std::to_string(s.HeadDim()) +
                        " must be even (RoPE rotates pairs)");
  }
  if (s.num_attention_heads % s.num_key_value_heads != 0) {
    return KeyError(source, "num_key_value_heads",
                    std::to_string(s.num_key_value_heads) + " does not divide num_attention_heads " +
                        std::to_string(s.num_attention_heads));
  }
  for (const auto& [key, value] : {std::pair{"rms_norm_eps", s.rms_norm_eps},
                                   std::pair{"rope_theta", s.rope_theta}}) {
    if (!(value > 0) || !std::isfinite(value)) {
      return KeyError(source, key, "expected a positive number");
    }
  }
  if (IsMistralFamily(config.family) && s.attention_bias) {
    return KeyError(source, "attention_bias", std::string(ModelTypeName(config.family)) +
                                                  " models have no attention biases");
  }
  if (config.o_proj_bias != (config.family == ModelFamily::kLlama && s.attention_bias)) {
    return KeyError(source, "attention_bias", "o_proj has a bias exactly in llama models with "
                                              "attention_bias true");
  }
  if (config.sliding_window < 0) return KeyError(source, "sliding_window", "must be >= 0");
  if (config.sliding_window > 0 && !IsMistralFamily(config.family)) {
    return KeyError(source, "sliding_window",
                    "only mistral and mixtral models use a sliding window here");
  }
  SERVELAB_RETURN_IF_ERROR(ValidateExperts(config, source));
  const RopeScaling& rope = config.rope_scaling;
  if (rope.type == RopeScaling::Type::kLlama3) {
    if (!(rope.factor > 0) || !(rope.low_freq_factor > 0)) {
      return KeyError(source, "rope_scaling", "factor and low_freq_factor must be positive");
    }
    if (!(rope.high_freq_factor > rope.low_freq_factor)) {
      return KeyError(source, "rope_scaling.high_freq_factor",
                      "must exceed low_freq_factor (the scaling interpolates between them)");
    }
    if (rope.original_max_position_embeddings < 1) {
      return KeyError(source, "rope_scaling.original_max_position_embeddings",
                      "expected a positive integer");
    }
  }
  for (int32_t id : config.eos_token_ids) {
    if (id < 0 || id >= s.vocab_size) {
      return KeyError(source, "eos_token_id",
                      std::to_string(id) + " is not a token id below vocab_size " +
                          std::to_string(s.vocab_size));
    }
  }
  if (TorchDTypeName(config.torch_dtype).empty()) {
    return KeyError(source, "torch_dtype", "must be float32, float16 or bfloat16");
  }
  return Status::Ok();
}

std::string ModelConfigJson(const ModelConfig& config) {
  SERVELAB_CHECK_MSG(ValidateModelConfig(config, "ModelConfigJson").ok(),
                     ValidateModelConfig(config, "ModelConfigJson").message());
  const ModelSpec& s = config.spec;
  nlohmann::json j;  // std::map underneath: keys come out sorted
  j["architectures"] = nlohmann::json::array({std::string(ArchitectureName(config.family))});
  j["model_type"] = ModelTypeName(config.family);
  j["hidden_act"] = "silu";
  j["hidden_size"] = s.hidden_size;
  j["intermediate_size"] = s.intermediate_size;
  j["num_attention_heads"] = s.num_attention_heads;
  j["num_key_value_heads"] = s.num_key_value_heads;
  j["num_hidden_layers"] = s.num_hidden_layers;
  if (s.head_dim > 0) j["head_dim"] = s.head_dim;
  j["vocab_size"] = s.vocab_size;
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["rms_norm_eps"] = s.rms_norm_eps;
  j["rope_theta"] = s.rope_theta;
  j["tie_word_embeddings"] = s.tie_word_embeddings;
  if (!IsMistralFamily(config.family)) j["attention_bias"] = s.attention_bias;
  if (IsMistralFamily(config.family)) {
    j["sliding_window"] = config.sliding_window > 0 ? nlohmann::json(config.sliding_window)
                                                    : nlohmann::json(nullptr);
  }
  if (IsQwenFamily(config.family)) j["use_sliding_window"] = false;
  if (config.family == ModelFamily::kMixtral) {
    j["num_local_experts"] = s.num_experts;
    j["num_experts_per_tok"] = s.num_experts_per_tok;
  } else if (config.family == ModelFamily::kQwen2Moe) {
    j["num_experts"] = s.num_experts;
    j["num_experts_per_tok"] = s.num_experts_per_tok;
    j["moe_intermediate_size"] = s.moe_intermediate_size;
    j["shared_expert_intermediate_size"] = s.shared_expert_intermediate_size;
    j["norm_topk_prob"] = config.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = nlohmann::json::array();
  }
  const RopeScaling& rope = config.rope_scaling;
  if (rope.type == RopeScaling::Type::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", rope.factor},
                         {"low_freq_factor", rope.low_freq_factor},
                         {"high_freq_factor", rope.high_freq_factor},
                         {"original_max_position_embeddings",
                          rope.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (config.eos_token_ids.size() == 1) {
    j["eos_token_id"] = config.eos_token_ids[0];
  } else if (!config.eos_token_ids.empty()) {
    j["eos_token_id"] = config.eos_token_ids;
  }
  j["torch_dtype"] = TorchDTypeName(config.torch_dtype);
  return j.dump(2) + "\n";
}

}  // namespace servelab
