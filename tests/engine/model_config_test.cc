// config.json parsing: real-shaped Llama 3.1, Llama 2, Mistral and Qwen2 samples, the
// write/read round trip, and a message naming the key for every malformed input.
#include "engine/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/engine/test_files.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Shaped like meta-llama/Llama-3.1-8B-Instruct's config.json.
constexpr const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": false,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "torch_dtype": "bfloat16", "transformers_version": "4.43.0", "use_cache": true,
  "vocab_size": 128256})";

// Llama 2 style: no num_key_value_heads (MHA), old "type"-less keys, one EOS id.
constexpr const char* kLlama2 = R"({"model_type": "llama", "hidden_size": 4096,
  "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
  "vocab_size": 32000, "eos_token_id": 2, "torch_dtype": "float16", "rope_scaling": null})";

constexpr const char* kMistral = R"({"architectures": ["MistralForCausalLM"],
  "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "num_hidden_layers": 32, "vocab_size": 32768, "max_position_embeddings": 32768,
  "rope_theta": 1000000.0, "sliding_window": null, "eos_token_id": 2,
  "torch_dtype": "bfloat16"})";

// Shaped like Qwen/Qwen2.5-0.5B-Instruct's: tied embeddings, implied q/k/v biases.
constexpr const char* kQwen2 = R"({"architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
  "num_attention_heads": 14, "num_key_value_heads": 2, "num_hidden_layers": 24,
  "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": false,
  "max_window_layers": 21, "tie_word_embeddings": true, "eos_token_id": 151645,
  "torch_dtype": "bfloat16"})";

// Shaped like mistralai/Mixtral-8x7B-v0.1's: 8 experts of width 14336, top 2.
constexpr const char* kMixtral = R"({"architectures": ["MixtralForCausalLM"],
  "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
  "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "num_local_experts": 8,
  "num_experts_per_tok": 2, "output_router_logits": false, "router_aux_loss_coef": 0.02,
  "eos_token_id": 2, "torch_dtype": "bfloat16"})";

// Shaped like Qwen/Qwen1.5-MoE-A2.7B's: 60 experts of 1408, top 4 not renormalised, a
// shared expert of 5632.
constexpr const char* kQwen2Moe = R"({"architectures": ["Qwen2MoeForCausalLM"],
  "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
  "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
  "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 24,
  "vocab_size": 151936, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "num_experts": 60, "num_experts_per_tok": 4,
  "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21,
  "tie_word_embeddings": false, "eos_token_id": 151643, "torch_dtype": "bfloat16"})";

ModelConfig Parse(const std::string& text) {
  StatusOr<ModelConfig> c = ParseModelConfig(text, "m/config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelConfigTest, Llama31WithLlama3RopeScaling) {
  const ModelConfig c = Parse(kLlama31);
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.spec.hidden_size, 4096);
  EXPECT_EQ(c.spec.num_attention_heads, 32);
  EXPECT_EQ(c.spec.num_key_value_heads, 8);
  EXPECT_EQ(c.spec.HeadDim(), 128);
  EXPECT_EQ(c.spec.intermediate_size, 14336);
  EXPECT_EQ(c.spec.num_hidden_layers, 32);
  EXPECT_EQ(c.spec.vocab_size, 128256);
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.spec.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.spec.rope_theta, 500000.0);
  EXPECT_FALSE(c.spec.tie_word_embeddings);
  EXPECT_FALSE(c.spec.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.torch_dtype, DType::kBf16);
  // The parsed spec gives the published 8.03B parameters.
  EXPECT_EQ(c.spec.NumParams(), 8030261248);
}

TEST(ModelConfigTest, Llama2DefaultsKvHeadsAndKeys) {
  const ModelConfig c = Parse(kLlama2);
  EXPECT_EQ(c.spec.num_key_value_heads, 32);
  EXPECT_EQ(c.spec.head_dim, 0);
  EXPECT_EQ(c.spec.max_position_embeddings, 2048);  // HF LlamaConfig's default
  EXPECT_DOUBLE_EQ(c.spec.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.spec.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(c.torch_dtype, DType::kFp16);
}

TEST(ModelConfigTest, MistralWithExplicitHeadDim) {
  const ModelConfig c = Parse(kMistral);
  EXPECT_EQ(c.family, ModelFamily::kMistral);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.KvDim(), 1024);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FALSE(c.spec.attention_bias);
  const ModelConfig v01 = Parse(R"({"model_type": "mistral", "hidden_size": 64,
      "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1,
      "vocab_size": 100, "sliding_window": 4096})");
  EXPECT_EQ(v01.sliding_window, 4096);
  EXPECT_EQ(v01.torch_dtype, DType::kFp32);
  EXPECT_TRUE(v01.eos_token_ids.empty());
}

TEST(ModelConfigTest, Qwen2HasQkvBiasesAndTiedEmbeddings) {
  const ModelConfig c = Parse(kQwen2);
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_TRUE(c.spec.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_TRUE(c.spec.tie_word_embeddings);
  EXPECT_EQ(c.spec.HeadDim(), 64);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window is false
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(c.spec.NumParams(), 494032768);  // Qwen2.5-0.5B's published count
  // An explicit attention_bias is honoured.
  std::string no_bias = kQwen2;
  no_bias.insert(1, R"("attention_bias": false, )");
  EXPECT_FALSE(Parse(no_bias).spec.attention_bias);
}

TEST(ModelConfigTest, LlamaAttentionBiasAddsOProjBias) {
  std::string text = kLlama2;
  text.insert(1, R"("attention_bias": true, )");
  const ModelConfig c = Parse(text);
  EXPECT_TRUE(c.spec.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);
}

TEST(ModelConfigTest, ModelTypeInferredFromArchitectures) {
  const ModelConfig c = Parse(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1,
      "vocab_size": 100, "dtype": "float16"})");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_EQ(c.torch_dtype, DType::kFp16);  // newer transformers write "dtype"
}

TEST(ModelConfigTest, MixtralExpertsAndParameterCounts) {
  const ModelConfig c = Parse(kMixtral);
  EXPECT_EQ(c.family, ModelFamily::kMixtral);
  EXPECT_EQ(c.spec.num_experts, 8);
  EXPECT_EQ(c.spec.num_experts_per_tok, 2);
  EXPECT_EQ(c.spec.ExpertWidth(), 14336);  // intermediate_size is each expert's width
  EXPECT_EQ(c.spec.shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.spec.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  // The model card: 46.7 B parameters, 12.9 B used per token.
  EXPECT_NEAR(static_cast<double>(c.spec.NumParams()) * 1e-9, 46.70, 0.01);
  EXPECT_NEAR(static_cast<double>(c.spec.NumActiveParams()) * 1e-9, 12.88, 0.01);
}

TEST(ModelConfigTest, Qwen2MoeSharedExpertAndRouting) {
  const ModelConfig c = Parse(kQwen2Moe);
  EXPECT_EQ(c.family, ModelFamily::kQwen2Moe);
  EXPECT_EQ(c.spec.num_experts, 60);
  EXPECT_EQ(c.spec.num_experts_per_tok, 4);
  EXPECT_EQ(c.spec.ExpertWidth(), 1408);
  EXPECT_EQ(c.spec.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.spec.attention_bias);  // q/k/v biases, as qwen2
  // The model card: 14.3 B parameters, 2.7 B activated (ModelSpec leaves out the shared
  // expert's [1, h] gate, 49K parameters in all).
  EXPECT_NEAR(static_cast<double>(c.spec.NumParams()) * 1e-9, 14.3, 0.05);
  EXPECT_NEAR(static_cast<double>(c.spec.NumActiveParams()) * 1e-9, 2.7, 0.05);
  // Absent, norm_topk_prob is false for qwen2_moe (HF's default).
  std::string text = kQwen2Moe;
  text.replace(text.find("\"norm_topk_prob\": false, "), 25, "");
  EXPECT_FALSE(Parse(text).norm_topk_prob);
}

TEST(ModelConfigTest, JsonRoundTripsEveryField) {
  for (const char* sample : {kLlama31, kLlama2, kMistral, kQwen2, kMixtral, kQwen2Moe}) {
    const ModelConfig a = Parse(sample);
    const ModelConfig b = Parse(ModelConfigJson(a));
    EXPECT_EQ(ModelConfigJson(a), ModelConfigJson(b));
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.spec.NumParams(), b.spec.NumParams());
    EXPECT_EQ(a.spec.head_dim, b.spec.head_dim);
    EXPECT_EQ(a.spec.max_position_embeddings, b.spec.max_position_embeddings);
    EXPECT_EQ(a.spec.rms_norm_eps, b.spec.rms_norm_eps);
    EXPECT_EQ(a.spec.rope_theta, b.spec.rope_theta);
    EXPECT_EQ(a.spec.attention_bias, b.spec.attention_bias);
    EXPECT_EQ(a.spec.tie_word_embeddings, b.spec.tie_word_embeddings);
    EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
    EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
    EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
              b.rope_scaling.original_max_position_embeddings);
    EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
    EXPECT_EQ(a.spec.num_experts, b.spec.num_experts);
    EXPECT_EQ(a.spec.num_experts_per_tok, b.spec.num_experts_per_tok);
    EXPECT_EQ(a.spec.moe_intermediate_size, b.spec.moe_intermediate_size);
    EXPECT_EQ(a.spec.shared_expert_intermediate_size, b.spec.shared_expert_intermediate_size);
    EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
    EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  }
}

TEST(ModelConfigTest, LoadReadsTheFolderAndNamesTheModel) {
  testing::TempDir temp;
  const auto dir = temp / "tiny-qwen";
  std::filesystem::create_directories(dir);
  testing::WriteBytes(dir / "config.json", kQwen2);
  StatusOr<ModelConfig> c = LoadModelConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->spec.name, "tiny-qwen");
  c = LoadModelConfig(dir / "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->spec.name, "tiny-qwen");
  std::filesystem::remove_all(dir);
  StatusOr<ModelConfig> missing = LoadModelConfig(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("tiny-qwen/config.json"));
}

}  // namespace
}  // namespace servelab
