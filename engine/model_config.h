#pragma once
// A Hugging Face model folder's config.json, for the Llama, Mistral and Qwen2 families and
// their mixtures of experts, Mixtral and Qwen2-MoE: the architecture (a core ModelSpec, in
// config.json terms) plus what only the engine needs (RoPE scaling, EOS ids, the stored
// dtype, how routing weights are normalised).
//
// Keys read, with their defaults when absent (or null):
//   model_type           required unless `architectures` names a supported class
//   architectures        optional; when present must list the family's *ForCausalLM
//   hidden_size, num_attention_heads, num_hidden_layers, intermediate_size, vocab_size
//                        required positive integers (they fix every weight shape)
//   num_key_value_heads  = num_attention_heads; must divide it
//   head_dim             = hidden_size / num_attention_heads (which must then divide)
//   max_position_embeddings  llama 2048, mistral and mixtral 131072, qwen2 and qwen2_moe
//                        32768 (HF's defaults)
//   rms_norm_eps 1e-6 (mixtral 1e-5), rope_theta 10000 (mixtral 1e6),
//   tie_word_embeddings false, hidden_act "silu"
//   attention_bias       qwen2 and qwen2_moe true (q/k/v biases); llama false (when true:
//                        q/k/v and o biases, as HF's Llama); mistral and mixtral have none
//   rope_scaling         null, or {"rope_type"|"type": "llama3" | "default", ...}
//   sliding_window       mistral, mixtral: null or a window; qwen2, qwen2_moe: only if
//                        use_sliding_window
// Mixtral (every layer a mixture of experts, each expert intermediate_size wide; softmax
// routing renormalised over the chosen experts):
//   num_local_experts, num_experts_per_tok    required, 1 <= per_tok <= experts
// Qwen2-MoE (every layer a mixture, plus a shared expert scaled by a sigmoid gate):
//   num_experts, num_experts_per_tok, moe_intermediate_size,
//   shared_expert_intermediate_size           required positive integers
//   norm_topk_prob       false: the chosen experts keep their softmax weights (HF's default)
//   decoder_sparse_step  1, mlp_only_layers []: other values (dense layers among the
//                        sparse ones) are refused
//   eos_token_id         an integer or a list of integers (absent: none)
//   torch_dtype | dtype  "float32" | "float16" | "bfloat16" (absent: float32)
// Other keys (bos_token_id, transformers_version, use_cache, ...) are ignored.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace servelab {

// Llama 3.1's frequency-dependent RoPE scaling ("rope_type": "llama3"). kNone means
// plain RoPE with rope_theta.
struct RopeScaling {
  enum class Type : uint8_t { kNone, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;            // > 0: low frequencies are divided by it
  double low_freq_factor = 1.0;   // > 0
  double high_freq_factor = 4.0;  // > low_freq_factor
  int32_t original_max_position_embeddings = 0;  // > 0 for kLlama3
};

enum class ModelFamily : uint8_t { kLlama, kMistral, kQwen2, kMixtral, kQwen2Moe };

// Mixtral and Qwen2-MoE: every layer's MLP is a mixture of experts (spec.num_experts > 0).
inline bool IsMoeFamily(ModelFamily family) {
  return family == ModelFamily::kMixtral || family == ModelFamily::kQwen2Moe;
}
// Mistral's attention (no biases, an optional sliding window): mistral, mixtral.
inline bool IsMistralFamily(ModelFamily family) {
  return family == ModelFamily::kMistral || family == ModelFamily::kMixtral;
}
// Qwen2's attention (q/k/v biases, use_sliding_window): qwen2, qwen2_moe.
inline bool IsQwenFamily(ModelFamily family) {
  return family == ModelFamily::kQwen2 || family == ModelFamily::kQwen2Moe;
}

struct ModelConfig {
  ModelSpec spec;  // spec.name is the model folder's name
  ModelFamily family = ModelFamily::kLlama;
  RopeScaling rope_scaling;
  bool o_proj_bias = false;              // llama with attention_bias: o_proj has a bias
                                         // too (ModelSpec::NumParams does not count it)
  int32_t sliding_window = 0;            // 0: full attention
  std::vector<int32_t> eos_token_ids;    // generation stops at any of them
  DType torch_dtype = DType::kFp32;      // how the checkpoint stores its weights
  // MoE: the chosen experts' softmax weights are divided by their sum (Mixtral always;
  // Qwen2-MoE's norm_topk_prob). Dense models ignore it.
  bool norm_topk_prob = true;

  // The longest context the runners attend to correctly: max_position_embeddings, or
  // the sliding window when the model has one (windowed attention is not implemented,
  // so a context past the window would be wrong).
  int32_t ServedContextLen() const {
    return sliding_window > 0 && sliding_window < spec.max_position_embeddings
               ? sliding_window
               : spec.max_position_embeddings;
  }
};

// "llama", "mistral", "qwen2", "mixtral", "qwen2_moe" (config.json's model_type).
std::string_view ModelTypeName(ModelFamily family);
// "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "MixtralForCausalLM",
// "Qwen2MoeForCausalLM".
std::string_view ArchitectureName(ModelFamily family);
std::vector<std::string> SupportedModelTypes();
// "float32", "float16", "bfloat16" for the three weight dtypes; "" otherwise.
std::string_view TorchDTypeName(DType dtype);

// Parses config.json text. `source` names the file in messages:
// "m/config.json: key 'hidden_size': expected a positive integer, got "4096"".
StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source);
// Reads `path`/config.json, or `path` itself when it names a .json file. spec.name is
// the name of the folder holding it. NotFound when the file cannot be read.
StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& path);

// The checks ParseModelConfig makes on the parsed values (divisibility, bias rules, RoPE
// scaling bounds), for configs built in code; messages name config.json keys.
Status ValidateModelConfig(const ModelConfig& config, const std::string& source);

// A config.json Hugging Face's loaders read back to the same ModelConfig: sorted keys,
// two-space indent, trailing newline, deterministic.
std::string ModelConfigJson(const ModelConfig& config);

}  // namespace servelab
