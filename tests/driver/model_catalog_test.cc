#include "driver/model_catalog.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(ModelCatalogTest, NamesAreTheDocumentedSet) {
  const std::vector<std::string> expected = {
      "llama-2-7b",  "llama-2-13b", "llama-2-70b", "llama-3-8b",  "llama-3-70b", "llama-3.1-8b",
      "llama-3.1-70b", "llama-3.1-405b", "mistral-7b",  "qwen2.5-7b",  "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
      "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"};
  EXPECT_EQ(ModelNames(), expected);
}

// Mixtures of experts: every expert counts toward the total, num_experts_per_tok of them
// toward the active count; both against the model cards (Mixtral's "46.7B total, 12.9B
// active", Qwen3's "30.5B / 3.3B" and "235B / 22B"), within 2%: the cards round to two
// or three figures (Qwen3-30B-A3B counts 3.353 B active here, its card "3.3B").
TEST(ModelCatalogTest, MoeTotalAndActiveParametersMatchTheModelCards) {
  const struct {
    const char* name;
    double total, active;
  } cases[] = {{"mixtral-8x7b", 46.7e9, 12.9e9},
               {"qwen3-30b-a3b", 30.5e9, 3.3e9},
               {"qwen3-235b-a22b", 235e9, 22e9},
               {"deepseek-v3", 671e9, 37e9}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ModelSpec m = FindModel(c.name).value();
    EXPECT_TRUE(m.IsMoe());
    EXPECT_NEAR(static_cast<double>(m.NumParams()) / c.total, 1.0, 0.02);
    EXPECT_NEAR(static_cast<double>(m.NumActiveParams()) / c.active, 1.0, 0.02);
  }
  // By hand for Mixtral: 32 layers of attention (41,943,040), router (32,768) and 8 or 2
  // experts of 3 x 4096 x 14336, two norms; embedding and LM head of 32000 x 4096.
  const ModelSpec mixtral = FindModel("mixtral-8x7b").value();
  const int64_t expert = 3LL * 4096 * 14336, embed = 32000LL * 4096, norms = 2 * 4096;
  EXPECT_EQ(mixtral.NumParams(), 32 * (41'943'040 + norms + 32'768 + 8 * expert) + 2 * embed + 4096);
  EXPECT_EQ(mixtral.NumActiveParams(),
            32 * (41'943'040 + norms + 32'768 + 2 * expert) + 2 * embed + 4096);
  // A dense model is all active.
  const ModelSpec llama = FindModel("llama-2-7b").value();
  EXPECT_EQ(llama.NumActiveParams(), llama.NumParams());
}

// Published parameter counts (model cards), within 1%.
TEST(ModelCatalogTest, ParameterCountsMatchTheModelCards) {
  const struct {
    const char* name;
    double params;
  } cases[] = {{"llama-2-7b", 6.74e9},   {"llama-2-13b", 13.02e9},  {"llama-2-70b", 68.98e9},
               {"llama-3-8b", 8.03e9},   {"llama-3-70b", 70.55e9},  {"llama-3.1-8b", 8.03e9},
               {"llama-3.1-70b", 70.55e9}, {"llama-3.1-405b", 405.9e9},
               {"mistral-7b", 7.25e9},   {"qwen2.5-7b", 7.62e9},    {"qwen2.5-14b", 14.7e9},
               {"qwen2.5-32b", 32.5e9},  {"qwen2.5-72b", 72.7e9}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ModelSpec model = FindModel(c.name).value();
    EXPECT_NEAR(static_cast<double>(model.NumParams()) / c.params, 1.0, 0.01);
  }
}

TEST(ModelCatalogTest, ExactLlama2_7bCount) {
  // embed 32000*4096 = 131,072,000, twice (untied LM head); per layer
  // 4*4096^2 + 3*4096*11008 + 2*4096 = 202,383,360, times 32; final norm 4096.
  EXPECT_EQ(FindModel("llama-2-7b").value().NumParams(),
            2 * 131'072'000LL + 32 * 202'383'360LL + 4096);
}

TEST(ModelCatalogTest, ArchitectureDetails) {
  const ModelSpec llama70 = FindModel("llama-2-70b").value();
  EXPECT_EQ(llama70.HeadDim(), 128);
  EXPECT_EQ(llama70.num_key_value_heads, 8);  // GQA
  const ModelSpec mistral = FindModel("mistral-7b").value();
  EXPECT_EQ(mistral.vocab_size, 32768);  // v0.3
  EXPECT_EQ(mistral.max_position_embeddings, 32768);
  const ModelSpec qwen = FindModel("qwen2.5-7b").value();
  EXPECT_TRUE(qwen.attention_bias);
  EXPECT_EQ(qwen.HeadDim(), 128);
  EXPECT_DOUBLE_EQ(qwen.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(FindModel("llama-3-8b").value().rope_theta, 500000.0);
  for (const ModelSpec& m : ModelCatalog()) {
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.hidden_size % m.num_attention_heads, 0);
    EXPECT_EQ(m.num_attention_heads % m.num_key_value_heads, 0);
    EXPECT_FALSE(m.tie_word_embeddings);
  }
}

TEST(ModelCatalogTest, KvBytesPerToken) {
  // Llama-2-7B, bf16: 2 (K,V) * 32 layers * 4096 * 2 bytes = 512 KiB.
  EXPECT_DOUBLE_EQ(FindModel("llama-2-7b").value().KvBytesPerToken(DType::kBf16), 524288.0);
  // Llama-3-8B, GQA with 8 KV heads: a quarter of that.
  EXPECT_DOUBLE_EQ(FindModel("llama-3-8b").value().KvBytesPerToken(DType::kBf16), 131072.0);
}

TEST(ModelCatalogTest, UnknownNameIsNotFound) {
  const StatusOr<ModelSpec> model = FindModel("llama-2-7");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("Unable to find model 'llama-2-7'"),
            std::string::npos);
  EXPECT_NE(model.status().message().find("did you mean"), std::string::npos);
}

}  // namespace
}  // namespace servelab
