// Every malformed config.json is a clear InvalidArgument naming the file and the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model_config.h"

namespace servelab {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

json Base() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
      "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 100,
      "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
      "eos_token_id": 2, "torch_dtype": "float32"})");
}

struct BadCase {
  const char* patch;     // merged into Base(); a null value deletes the key
  const char* expected;  // substring of the message (after "m/config.json: ")
};

// The message names the key and says what was expected (and got).
const BadCase kCases[] = {
    {R"({"hidden_size": "4096"})", "key 'hidden_size': expected a positive integer, got \"4096\""},
    {R"({"hidden_size": 0})", "key 'hidden_size': expected a positive integer, got 0"},
    {R"({"hidden_size": -64})", "key 'hidden_size': expected a positive integer"},
    {R"({"hidden_size": 64.5})", "key 'hidden_size': expected a positive integer, got 64.5"},
    {R"({"hidden_size": 3000000000})", "key 'hidden_size': expected a positive integer"},
    {R"({"hidden_size": null})", "key 'hidden_size': missing (expected a positive integer)"},
    {R"({"num_hidden_layers": null})", "key 'num_hidden_layers': missing"},
    {R"({"vocab_size": true})", "key 'vocab_size': expected a positive integer, got true"},
    {R"({"intermediate_size": [128]})", "key 'intermediate_size': expected a positive integer"},
    {R"({"num_key_value_heads": 3})", "key 'num_key_value_heads': 3 does not divide num_attention_heads 4"},
    {R"({"num_attention_heads": 5, "num_key_value_heads": 5})",
     "key 'hidden_size': 64 is not divisible by num_attention_heads 5"},
    {R"({"head_dim": 15})", "key 'head_dim': the head dimension 15 must be even"},
    {R"({"head_dim": "x"})", "key 'head_dim': expected a positive integer"},
    {R"({"max_position_embeddings": 0})", "key 'max_position_embeddings': expected a positive integer"},
    {R"({"model_type": "gemma"})",
     "key 'model_type': Unable to find model_type 'gemma'. Valid values are: llama, mistral, qwen2"},
    {R"({"model_type": 7})", "key 'model_type': expected a string, got 7"},
    {R"({"model_type": null, "architectures": ["GPT2LMHeadModel"]})",
     "key 'model_type': missing, and no supported class in 'architectures'"},
    {R"({"architectures": ["MistralForCausalLM"]})",
     "key 'architectures': expected a list containing \"LlamaForCausalLM\" for model_type 'llama'"},
    {R"({"architectures": "LlamaForCausalLM"})", "key 'architectures': expected a list of strings"},
    {R"({"rms_norm_eps": 0})", "key 'rms_norm_eps': expected a positive number, got 0"},
    {R"({"rope_theta": "big"})", "key 'rope_theta': expected a positive number, got \"big\""},
    {R"({"rope_theta": -1})", "key 'rope_theta': expected a positive number"},
    {R"({"tie_word_embeddings": "yes"})", "key 'tie_word_embeddings': expected true or false"},
    {R"({"attention_bias": 1})", "key 'attention_bias': expected true or false"},
    {R"({"mlp_bias": true})", "key 'mlp_bias': true is not supported"},
    {R"({"hidden_act": "gelu"})", "key 'hidden_act': 'gelu' is not supported (only silu)"},
    {R"({"rope_scaling": "llama3"})", "key 'rope_scaling': expected null or a mapping"},
    {R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})",
     "key 'rope_scaling.rope_type': 'yarn' is not supported (supported: llama3, default)"},
    {R"({"rope_scaling": {"type": "linear", "factor": 2.0}})",
     "key 'rope_scaling.type': 'linear' is not supported"},
    {R"({"rope_scaling": {"factor": 2.0}})", "key 'rope_scaling.type': missing"},
    {R"({"rope_scaling": {"rope_type": "llama3", "low_freq_factor": 1, "high_freq_factor": 4,
         "original_max_position_embeddings": 8192}})",
     "key 'rope_scaling.factor': missing (expected a positive number)"},
    {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
         "high_freq_factor": 4, "original_max_position_embeddings": 0}})",
     "key 'rope_scaling.original_max_position_embeddings': expected a positive integer"},
    {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
         "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
     "key 'rope_scaling.high_freq_factor': must exceed low_freq_factor"},
    {R"({"eos_token_id": "2"})", "key 'eos_token_id': expected a non-negative integer or a list"},
    {R"({"eos_token_id": [1, "x"]})", "key 'eos_token_id': expected a non-negative integer"},
    {R"({"eos_token_id": -1})", "key 'eos_token_id': expected a non-negative integer"},
    {R"({"eos_token_id": [2, 100]})", "key 'eos_token_id': 100 is not a token id below vocab_size 100"},
    {R"({"torch_dtype": "int8"})",
     "key 'torch_dtype': 'int8' is not supported (supported: float32, float16, bfloat16)"},
    {R"({"torch_dtype": null, "dtype": "float64"})", "key 'dtype': 'float64' is not supported"},
    {R"({"model_type": "mistral", "architectures": null, "attention_bias": true})",
     "key 'attention_bias': mistral models have no attention biases"},
    {R"({"model_type": "mistral", "architectures": null, "sliding_window": 0})",
     "key 'sliding_window': expected a positive integer"},
    {R"({"model_type": "qwen2", "architectures": null, "use_sliding_window": true})",
     "key 'use_sliding_window': true is not supported"},
};

TEST(ModelConfigErrorsTest, BaseIsValid) {
  StatusOr<ModelConfig> c = ParseModelConfig(Base().dump(), "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
}

TEST(ModelConfigErrorsTest, EachMalformedKeyIsNamed) {
  for (const BadCase& bad : kCases) {
    json config = Base();
    config.merge_patch(json::parse(bad.patch));  // RFC 7396: null deletes
    StatusOr<ModelConfig> c = ParseModelConfig(config.dump(), "m/config.json");
    ASSERT_FALSE(c.ok()) << bad.patch;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad.patch;
    EXPECT_THAT(c.status().message(), StartsWith("m/config.json: ")) << bad.patch;
    EXPECT_THAT(c.status().message(), HasSubstr(bad.expected)) << bad.patch;
  }
}

// The expert keys: each family's own, in range, and no experts on a dense model_type.
TEST(ModelConfigErrorsTest, ExpertKeysAreNamed) {
  const json mixtral = [] {
    json c = Base();
    c["architectures"] = {"MixtralForCausalLM"};
    c["model_type"] = "mixtral";
    c["num_local_experts"] = 4;
    c["num_experts_per_tok"] = 2;
    return c;
  }();
  const json qwen = [] {
    json c = Base();
    c["architectures"] = {"Qwen2MoeForCausalLM"};
    c["model_type"] = "qwen2_moe";
    c["num_experts"] = 4;
    c["num_experts_per_tok"] = 2;
    c["moe_intermediate_size"] = 32;
    c["shared_expert_intermediate_size"] = 64;
    return c;
  }();
  ASSERT_TRUE(ParseModelConfig(mixtral.dump(), "m/config.json").ok());
  ASSERT_TRUE(ParseModelConfig(qwen.dump(), "m/config.json").ok());
  const struct {
    json base;
    const char* patch;
    const char* expected;
  } cases[] = {
      {Base(), R"({"num_local_experts": 8})",
       "key 'num_local_experts': a mixture of experts needs model_type mixtral or qwen2_moe, not llama"},
      {mixtral, R"({"num_local_experts": null})", "key 'num_local_experts': missing"},
      {mixtral, R"({"num_experts_per_tok": 5})", "key 'num_experts_per_tok': 5 exceeds num_local_experts 4"},
      {mixtral, R"({"num_experts_per_tok": 0})", "key 'num_experts_per_tok': expected a positive integer"},
      {mixtral, R"({"num_local_experts": 8192})", "key 'num_experts': 8192 is out of range"},
      {qwen, R"({"moe_intermediate_size": null})", "key 'moe_intermediate_size': missing"},
      {qwen, R"({"shared_expert_intermediate_size": 0})", "key 'shared_expert_intermediate_size': expected a positive integer"},
      {qwen, R"({"norm_topk_prob": 1})", "key 'norm_topk_prob': expected true or false"},
      {qwen, R"({"decoder_sparse_step": 2})", "key 'decoder_sparse_step': 2 is not supported"},
      {qwen, R"({"mlp_only_layers": [0]})", "key 'mlp_only_layers': only [] is supported"},
  };
  for (const auto& c : cases) {
    json config = c.base;
    config.merge_patch(json::parse(c.patch));
    const Status s = ParseModelConfig(config.dump(), "m/config.json").status();
    EXPECT_TRUE(s.IsBadInput()) << c.patch;
    EXPECT_THAT(s.message(), HasSubstr(c.expected)) << c.patch;
  }
}

TEST(ModelConfigErrorsTest, NotJsonOrNotAnObject) {
  StatusOr<ModelConfig> c = ParseModelConfig("{\"hidden_size\": 64,", "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), StartsWith("m/config.json: not valid JSON"));
  c = ParseModelConfig("[1, 2]", "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("m/config.json: expected a JSON object"));
}

TEST(ModelConfigErrorsTest, ValidateCatchesConfigsBuiltInCode) {
  ModelConfig c = *ParseModelConfig(Base().dump(), "m/config.json");
  c.o_proj_bias = true;  // llama without attention_bias has no o_proj bias
  EXPECT_THAT(ValidateModelConfig(c, "made").message(), HasSubstr("made: key 'attention_bias'"));
  c.o_proj_bias = false;
  c.spec.vocab_size = 0;
  EXPECT_THAT(ValidateModelConfig(c, "made").message(), HasSubstr("key 'vocab_size'"));
}

}  // namespace
}  // namespace servelab
