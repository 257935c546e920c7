// WriteRandomModel: the folder reads back as the config and the HF weight layout, values
// are seeded and stable, shards hold the same bytes, a ~20M-parameter model is quick.
#include "engine/random_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "engine/safetensors.h"
#include "engine/weight_layout.h"
#include "tests/engine/test_files.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;

ModelConfig Tiny(ModelFamily family, DType dtype) {
  ModelConfig c;
  c.family = family;
  c.spec.hidden_size = 32;
  c.spec.num_attention_heads = 4;
  c.spec.num_key_value_heads = 2;
  c.spec.intermediate_size = 48;
  c.spec.num_hidden_layers = 2;
  c.spec.vocab_size = 50;
  c.spec.max_position_embeddings = 128;
  c.spec.attention_bias = family == ModelFamily::kQwen2;
  c.eos_token_ids = {2};
  c.torch_dtype = dtype;
  return c;
}

StatusOr<WrittenModel> Write(const ModelConfig& config, const std::filesystem::path& dir,
                             uint64_t seed = 7, int32_t shards = 1) {
  RandomModelOptions options;
  options.config = config;
  options.seed = seed;
  options.shards = shards;
  return WriteRandomModel(options, dir);
}

// The folder's config and tensors are exactly the config and HfWeightLayout.
void ExpectMatches(const std::filesystem::path& dir, const ModelConfig& config) {
  StatusOr<ModelConfig> read = LoadModelConfig(dir);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(ModelConfigJson(*read), ModelConfigJson(config));
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::vector<TensorSpec> layout = HfWeightLayout(config, config.torch_dtype);
  ASSERT_EQ(file->tensors().size(), layout.size());
  int64_t params = 0;
  for (const TensorSpec& t : layout) {
    StatusOr<const TensorView*> view = file->Get(t.name, t.shape);
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_EQ((*view)->dtype, config.torch_dtype) << t.name;
    params += (*view)->NumElements();
  }
  // ModelSpec::NumParams counts q/k/v biases only; llama's o_proj bias adds h per layer.
  const int64_t o_bias = config.o_proj_bias ? int64_t{config.spec.num_hidden_layers} *
                                                  config.spec.hidden_size
                                            : 0;
  EXPECT_EQ(params, config.spec.NumParams() + o_bias);
}

TEST(RandomModelTest, EachFamilyReadsBack) {
  TempDir dir;
  for (ModelFamily family : {ModelFamily::kLlama, ModelFamily::kMistral, ModelFamily::kQwen2}) {
    const std::filesystem::path out = dir / std::string(ModelTypeName(family));
    const ModelConfig config = Tiny(family, DType::kBf16);
    StatusOr<WrittenModel> written = Write(config, out);
    ASSERT_TRUE(written.ok()) << written.status().message();
    EXPECT_EQ(written->num_params, config.spec.NumParams());
    ExpectMatches(out, config);
  }
  StatusOr<SafetensorsFile> qwen = SafetensorsFile::Open(dir / "qwen2");
  ASSERT_TRUE(qwen.ok());
  const int64_t kv_bias[] = {16};
  EXPECT_TRUE(qwen->Get("model.layers.1.self_attn.k_proj.bias", kv_bias).ok());
  EXPECT_EQ(qwen->Find("model.layers.0.self_attn.o_proj.bias"), nullptr);
}

TEST(RandomModelTest, TiedEmbeddingsHaveNoLmHeadAndLlamaBiasesIncludeOProj) {
  TempDir dir;
  ModelConfig config = Tiny(ModelFamily::kLlama, DType::kFp16);
  config.spec.tie_word_embeddings = true;
  config.spec.attention_bias = true;
  config.o_proj_bias = true;
  config.spec.head_dim = 16;  // q: 4 x 16 = 64 rows, not hidden_size
  ASSERT_TRUE(Write(config, dir.path()).ok());
  ExpectMatches(dir.path(), config);
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path());
  EXPECT_EQ(file->Find("lm_head.weight"), nullptr);
  const int64_t q[] = {64, 32}, o[] = {32, 64}, o_bias[] = {32};
  EXPECT_TRUE(file->Get("model.layers.0.self_attn.q_proj.weight", q).ok());
  EXPECT_TRUE(file->Get("model.layers.0.self_attn.o_proj.weight", o).ok());
  EXPECT_TRUE(file->Get("model.layers.0.self_attn.o_proj.bias", o_bias).ok());
}

TEST(RandomModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir dir;
  const ModelConfig config = Tiny(ModelFamily::kLlama, DType::kBf16);
  ASSERT_TRUE(Write(config, dir / "a", 7).ok());
  ASSERT_TRUE(Write(config, dir / "b", 7).ok());
  ASSERT_TRUE(Write(config, dir / "c", 8).ok());
  for (const char* name : {"config.json", "model.safetensors"}) {
    EXPECT_EQ(ReadBytes(dir / "a" / name), ReadBytes(dir / "b" / name)) << name;
  }
  EXPECT_EQ(ReadBytes(dir / "a" / "config.json"), ReadBytes(dir / "c" / "config.json"));
  EXPECT_NE(ReadBytes(dir / "a" / "model.safetensors"), ReadBytes(dir / "c" / "model.safetensors"));
}

TEST(RandomModelTest, ValuesHaveTheirStatisticsAndDependOnNameOnly) {
  TempDir dir;
  ModelConfig config = Tiny(ModelFamily::kLlama, DType::kFp32);
  config.spec.vocab_size = 4000;  // 128000 embedding values for the statistics
  ASSERT_TRUE(Write(config, dir / "two").ok());
  config.spec.num_hidden_layers = 3;
  ASSERT_TRUE(Write(config, dir / "three").ok());
  StatusOr<SafetensorsFile> two = SafetensorsFile::Open(dir / "two");
  StatusOr<SafetensorsFile> three = SafetensorsFile::Open(dir / "three");
  ASSERT_TRUE(two.ok() && three.ok());
  // A tensor's values depend on the seed and its name: layer 1 is the same in both.
  const TensorView* a = two->Find("model.layers.1.mlp.up_proj.weight");
  const TensorView* b = three->Find("model.layers.1.mlp.up_proj.weight");
  ASSERT_EQ(a->bytes, b->bytes);
  EXPECT_EQ(std::memcmp(a->data, b->data, a->bytes), 0);

  const std::vector<float> embed = ToFloat32(*two->Find("model.embed_tokens.weight"));
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (float v : embed) {
    sum += v;
    sum_sq += double{v} * v;
    max_abs = std::max(max_abs, std::abs(double{v}));
  }
  const double mean = sum / embed.size(), std = std::sqrt(sum_sq / embed.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02 * 5 / std::sqrt(embed.size()));  // 5 standard errors
  EXPECT_NEAR(std, 0.02, 0.0005);
  EXPECT_LE(max_abs, 0.02 * 2 * std::sqrt(3.0) + 1e-6);  // bounded: 2 sqrt(3) std
  const std::vector<float> norm = ToFloat32(*two->Find("model.norm.weight"));
  double norm_mean = 0;
  for (float v : norm) norm_mean += v / norm.size();
  EXPECT_NEAR(norm_mean, 1.0, 0.03);
}

TEST(RandomModelTest, ShardsHoldTheSameTensors) {
  TempDir dir;
  const ModelConfig config = Tiny(ModelFamily::kQwen2, DType::kBf16);
  ASSERT_TRUE(Write(config, dir / "single").ok());
  StatusOr<WrittenModel> written = Write(config, dir / "sharded", 7, 3);
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_EQ(written->files.size(), 5u);  // config, index, 3 shards
  EXPECT_EQ(written->files[2].filename(), "model-00001-of-00003.safetensors");
  EXPECT_FALSE(std::filesystem::exists(dir / "sharded" / "model.safetensors"));
  ExpectMatches(dir / "sharded", config);
  StatusOr<SafetensorsFile> single = SafetensorsFile::Open(dir / "single");
  StatusOr<SafetensorsFile> sharded = SafetensorsFile::Open(dir / "sharded");
  ASSERT_TRUE(single.ok() && sharded.ok());
  EXPECT_EQ(sharded->files().size(), 4u);
  for (const TensorView& t : single->tensors()) {
    const TensorView* s = sharded->Find(t.name);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(std::memcmp(t.data, s->data, t.bytes), 0) << t.name;
  }
  // Rewriting the folder unsharded removes the index that would shadow it.
  ASSERT_TRUE(Write(config, dir / "sharded").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
  ExpectMatches(dir / "sharded", config);
}

TEST(RandomModelTest, RejectsBadShardCountAndInvalidConfig) {
  TempDir dir;
  ModelConfig config = Tiny(ModelFamily::kLlama, DType::kBf16);
  StatusOr<WrittenModel> w = Write(config, dir.path(), 7, 100);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("shards 100 is not in [1, 21]"));
  config.spec.num_key_value_heads = 3;
  w = Write(config, dir.path());
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("key 'num_key_value_heads'"));
  // Layers and experts each within their bounds, their product not: refused before the
  // ~200 million tensors' list is made.
  ModelConfig many = Tiny(ModelFamily::kMixtral, DType::kBf16);
  many.spec.num_hidden_layers = 16384;
  many.spec.num_experts = 4096;
  many.spec.num_experts_per_tok = 1;
  w = Write(many, dir.path());
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.status().IsBadInput());
  EXPECT_THAT(w.status().message(), HasSubstr("num_hidden_layers 16384 x num_experts 4096: about 201588744 "
                                              "tensors; a random model has at most 1000000"));
}

TEST(RandomModelTest, TwentyMillionParametersInWellUnderASecond) {
  TempDir dir;
  ModelConfig config = Tiny(ModelFamily::kLlama, DType::kBf16);
  config.spec.num_hidden_layers = 4;
  config.spec.hidden_size = 512;
  config.spec.num_attention_heads = 8;
  config.spec.num_key_value_heads = 4;
  config.spec.intermediate_size = 1536;
  config.spec.vocab_size = 8000;
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  StatusOr<WrittenModel> written = Write(config, dir.path());
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->num_params, 20'779'520);
  std::printf("20.8M-parameter bf16 model written in %.3f s CPU, %.3f s wall\n", cpu, wall);
  // CPU time, so that a loaded machine does not fail the test; about 0.3 s here.
  EXPECT_LT(cpu, 1.0);
}

}  // namespace
}  // namespace servelab
