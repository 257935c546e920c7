// LoadModelWeights: float32 copies of every tensor in the layout the runner uses (gate and
// up stacked, biases, tied head), the same from one file or shards, and clear errors for
// a missing tensor or a wrong shape.
#include "engine/model_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/random_model.h"
#include "engine/safetensors_writer.h"
#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

void Write(const ModelConfig& config, const fs::path& dir, int32_t shards = 1) {
  StatusOr<WrittenModel> written = WriteRandomModel(RandomModelOptions{config, 5, shards}, dir);
  ASSERT_TRUE(written.ok()) << written.status().message();
}

std::vector<float> Tensor(const fs::path& dir, const std::string& name) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir);
  EXPECT_TRUE(file.ok()) << file.status().message();
  const TensorView* view = file->Find(name);
  EXPECT_NE(view, nullptr) << name;
  return view ? ToFloat32(*view) : std::vector<float>{};
}

std::vector<float> Values(const RowMatrix& m) { return {m.data(), m.data() + m.size()}; }

// Copies `src`'s model into `dst` without tensor `drop`, with tensor `reshape` given `shape`.
void Rewrite(const fs::path& src, const fs::path& dst, const std::string& drop,
             const std::string& reshape, std::vector<int64_t> shape) {
  fs::create_directories(dst);
  fs::copy_file(src / "config.json", dst / "config.json");
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(src);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> values;
  for (const TensorView& t : file->tensors()) {
    if (t.name == drop) continue;
    specs.push_back({t.name, t.dtype, t.name == reshape ? shape : t.shape});
    values.push_back(ToFloat32(t));
  }
  ASSERT_TRUE(WriteSafetensors(dst / "model.safetensors", specs, values).ok());
}

TEST(ModelWeightsTest, LoadsEveryTensorAsFloat32InTheRunnersLayout) {
  TempDir dir;
  const ModelConfig config = testing::TinyConfig(2);
  Write(config, dir.path());
  StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->layers.size(), 2u);
  const LayerWeights& l1 = w->layers[1];
  EXPECT_EQ(l1.q_proj.rows(), 64);
  EXPECT_EQ(l1.k_proj.rows(), 32);
  EXPECT_EQ(Values(l1.k_proj), Tensor(dir.path(), "model.layers.1.self_attn.k_proj.weight"));
  EXPECT_EQ(Values(w->lm_head), Tensor(dir.path(), "lm_head.weight"));
  // gate rows, then up rows.
  std::vector<float> gate_up = Tensor(dir.path(), "model.layers.1.mlp.gate_proj.weight");
  const std::vector<float> up = Tensor(dir.path(), "model.layers.1.mlp.up_proj.weight");
  gate_up.insert(gate_up.end(), up.begin(), up.end());
  EXPECT_EQ(Values(l1.mlp.gate_up_proj), gate_up);
  EXPECT_EQ(l1.post_attention_norm,
            Tensor(dir.path(), "model.layers.1.post_attention_layernorm.weight"));
  EXPECT_EQ(l1.q_bias.size(), 0);
  EXPECT_EQ(&w->LmHead(), &w->lm_head);
  EXPECT_EQ(w->NumFloats(), config.spec.NumParams());
}

TEST(ModelWeightsTest, ShardedBf16TiedQwen2) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(1, ModelFamily::kQwen2);
  config.spec.tie_word_embeddings = true;
  config.torch_dtype = DType::kBf16;
  Write(config, dir / "one");
  Write(config, dir / "sharded", 3);
  StatusOr<ModelWeights> one = LoadModelWeights(dir / "one");
  StatusOr<ModelWeights> sharded = LoadModelWeights(dir / "sharded");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_TRUE(sharded.ok()) << sharded.status().message();
  EXPECT_EQ(Values(one->layers[0].mlp.down_proj), Values(sharded->layers[0].mlp.down_proj));
  EXPECT_EQ(Values(one->embed_tokens), Values(sharded->embed_tokens));
  // Decoded once from bf16, exactly.
  EXPECT_EQ(Values(one->embed_tokens), Tensor(dir / "one", "model.embed_tokens.weight"));
  const std::vector<float> bias = Tensor(dir / "one", "model.layers.1.self_attn.v_proj.bias");
  ASSERT_EQ(one->layers[1].v_bias.size(), 16);
  EXPECT_EQ(std::vector<float>(one->layers[1].v_bias.data(), one->layers[1].v_bias.data() + 16),
            bias);
  EXPECT_EQ(one->lm_head.size(), 0);
  EXPECT_EQ(&one->LmHead(), &one->embed_tokens);
  EXPECT_EQ(one->NumFloats(), config.spec.NumParams());
}

TEST(ModelWeightsTest, RejectsAMissingTensorNamingItAndTheFile) {
  TempDir dir;
  Write(testing::TinyConfig(2), dir / "good");
  Rewrite(dir / "good", dir / "bad", "model.layers.1.mlp.up_proj.weight", "", {});
  StatusOr<ModelWeights> w = LoadModelWeights(dir / "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("'model.layers.1.mlp.up_proj.weight'"));
  EXPECT_THAT(w.status().message(), HasSubstr((dir / "bad" / "model.safetensors").string()));
  EXPECT_THAT(w.status().message(), HasSubstr("expected shape [128, 64]"));
}

TEST(ModelWeightsTest, RejectsAWrongShapeNamingBothShapes) {
  TempDir dir;
  Write(testing::TinyConfig(2), dir / "good");
  Rewrite(dir / "good", dir / "bad", "", "model.layers.0.self_attn.k_proj.weight", {64, 32});
  StatusOr<ModelWeights> w = LoadModelWeights(dir / "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(),
              HasSubstr((dir / "bad" / "model.safetensors").string() +
                        ": tensor 'model.layers.0.self_attn.k_proj.weight' has shape [64, 32], "
                        "expected [32, 64]"));
}

TEST(ModelWeightsTest, ConfigMismatchIsAShapeError) {
  // A config.json claiming a wider MLP than the checkpoint holds.
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2);
  Write(config, dir.path());
  config.spec.intermediate_size = 96;
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path());
  ASSERT_TRUE(file.ok());
  StatusOr<ModelWeights> w = LoadModelWeights(config, *file);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(
      w.status().message(),
      HasSubstr("'model.layers.0.mlp.gate_proj.weight' has shape [128, 64], expected [96, 64]"));
}

TEST(ModelWeightsTest, MissingFolderIsNotFound) {
  StatusOr<ModelWeights> w = LoadModelWeights("/nonexistent/servelab/model");
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.status().IsBadInput());
}

}  // namespace
}  // namespace servelab
