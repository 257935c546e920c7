// `servelab make-model` as a user meets it: files match the flags, runs are
// byte-identical, catalog models scale down, bad flags exit 2 with a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/model_config.h"
#include "engine/model_weights.h"
#include "engine/safetensors.h"
#include "tests/engine/test_files.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;

struct Result {
  int exit_code;
  std::string out, err;
};

class MakeModelCommandTest : public ::testing::Test {
 protected:
  Result Run(const std::string& args) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    const std::string command = std::string(SERVELAB_BINARY) + " make-model " + args + " >" +
                                out + " 2>" + err + " </dev/null";
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadBytes(out), ReadBytes(err)};
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  TempDir dir_;
};

constexpr const char* kSmall =
    "--arch mistral --layers 3 --hidden 64 --heads 8 --kv-heads 2 --intermediate 96 --vocab 300";
// kSmall with one flag's value replaced (boost rejects a repeated flag).
std::string Small(const std::string& flag, const std::string& value) {
  std::string args = kSmall;
  const size_t start = args.find(flag + " ") + flag.size() + 1;
  const size_t end = args.find(' ', start);
  return args.replace(start, end == std::string::npos ? end : end - start, value);
}

TEST_F(MakeModelCommandTest, FilesMatchTheFlags) {
  const Result r = Run(std::string(kSmall) + " --head-dim 16 --max-position 512 --rope-theta 1e6 "
                       "--tie-embeddings --dtype f16 --out " + Path("m"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote"));
  StatusOr<ModelConfig> c = LoadModelConfig(Path("m"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kMistral);
  EXPECT_EQ(c->spec.num_hidden_layers, 3);
  EXPECT_EQ(c->spec.hidden_size, 64);
  EXPECT_EQ(c->spec.num_attention_heads, 8);
  EXPECT_EQ(c->spec.num_key_value_heads, 2);
  EXPECT_EQ(c->spec.head_dim, 16);
  EXPECT_EQ(c->spec.intermediate_size, 96);
  EXPECT_EQ(c->spec.vocab_size, 300);
  EXPECT_EQ(c->spec.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c->spec.rope_theta, 1e6);
  EXPECT_TRUE(c->spec.tie_word_embeddings);
  EXPECT_EQ(c->torch_dtype, DType::kFp16);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
  const std::string json = ReadBytes(Path("m") + "/config.json");
  EXPECT_THAT(json, HasSubstr("\"MistralForCausalLM\""));
  StatusOr<SafetensorsFile> w = SafetensorsFile::Open(Path("m"));
  ASSERT_TRUE(w.ok()) << w.status().message();
  const int64_t q[] = {128, 64}, k[] = {32, 64}, o[] = {64, 128}, down[] = {64, 96}, emb[] = {300, 64};
  EXPECT_TRUE(w->Get("model.layers.2.self_attn.q_proj.weight", q).ok());
  EXPECT_TRUE(w->Get("model.layers.2.self_attn.k_proj.weight", k).ok());
  EXPECT_TRUE(w->Get("model.layers.2.self_attn.o_proj.weight", o).ok());
  EXPECT_TRUE(w->Get("model.layers.0.mlp.down_proj.weight", down).ok());
  EXPECT_TRUE(w->Get("model.embed_tokens.weight", emb).ok());
  EXPECT_EQ(w->Find("lm_head.weight"), nullptr);
  EXPECT_EQ(w->Find("model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(w->tensors().front().dtype, DType::kFp16);
}

TEST_F(MakeModelCommandTest, SameSeedByteIdenticalOtherSeedDiffers) {
  for (const char* run : {"a --seed 5", "b --seed 5", "c --seed 6"}) {
    ASSERT_EQ(Run(std::string(kSmall) + " --out " + Path(run)).exit_code, 0) << run;
  }
  EXPECT_EQ(ReadBytes(Path("a") + "/config.json"), ReadBytes(Path("b") + "/config.json"));
  EXPECT_EQ(ReadBytes(Path("a") + "/model.safetensors"), ReadBytes(Path("b") + "/model.safetensors"));
  EXPECT_NE(ReadBytes(Path("a") + "/model.safetensors"), ReadBytes(Path("c") + "/model.safetensors"));
}

TEST_F(MakeModelCommandTest, ShardedModelOpensWithItsIndex) {
  ASSERT_EQ(Run(Small("--arch", "qwen2") + " --shards 2 --out " + Path("s")).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(Path("s") + "/model-00002-of-00002.safetensors"));
  StatusOr<SafetensorsFile> w = SafetensorsFile::Open(Path("s"));
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->files().size(), 3u);
  EXPECT_NE(w->Find("model.layers.1.self_attn.v_proj.bias"), nullptr);  // qwen2 biases
}

// A model is written beside its folder and renamed in: a sharded model rewritten as one
// file loses the index that would shadow it and nothing else of the folder, and no
// staging folder stays behind. A regular file where the folder goes is bad input.
TEST_F(MakeModelCommandTest, WritesLandWholeAndTheirPlaceIsChecked) {
  ASSERT_EQ(Run(std::string(kSmall) + " --shards 2 --out " + Path("m")).exit_code, 0);
  { std::ofstream(Path("m") + "/README.md") << "the user's own file"; }
  ASSERT_EQ(Run(std::string(kSmall) + " --out " + Path("m")).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(Path("m") + "/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(Path("m") + "/model.safetensors"));
  EXPECT_EQ(ReadBytes(Path("m") + "/README.md"), "the user's own file");
  StatusOr<SafetensorsFile> w = SafetensorsFile::Open(Path("m"));
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".creating."), std::string::npos) << entry.path();
  }
  { std::ofstream(Path("file")) << "not a folder"; }
  const Result onto = Run(std::string(kSmall) + " --out " + Path("file"));
  EXPECT_EQ(onto.exit_code, 2);
  EXPECT_THAT(onto.err, HasSubstr("is a file, where the output folder"));
  EXPECT_EQ(ReadBytes(Path("file")), "not a folder");
}

TEST_F(MakeModelCommandTest, FromCatalogKeepsHeadRatios) {
  const Result r = Run("--from llama-3-8b --layers 2 --hidden 128 --vocab 1000 --out " + Path("l"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  StatusOr<ModelConfig> c = LoadModelConfig(Path("l"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kLlama);
  EXPECT_EQ(c->spec.num_hidden_layers, 2);
  EXPECT_EQ(c->spec.num_attention_heads, 32);
  EXPECT_EQ(c->spec.num_key_value_heads, 8);
  EXPECT_EQ(c->spec.HeadDim(), 4);
  EXPECT_EQ(c->spec.intermediate_size, 448);  // 14336 x 128 / 4096
  EXPECT_EQ(c->spec.vocab_size, 1000);
  EXPECT_EQ(c->spec.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c->spec.rope_theta, 500000.0);
  // A new head count without --kv-heads keeps the group size as far as it can: qwen2.5-7b
  // has 7 query heads per KV head; 8 heads x 4 / 28 rounds down to 1 KV head.
  ASSERT_EQ(Run("--from qwen2.5-7b --layers 1 --hidden 64 --heads 8 --vocab 500 --out " + Path("q"))
                .exit_code, 0);
  c = LoadModelConfig(Path("q"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->family, ModelFamily::kQwen2);
  EXPECT_EQ(c->spec.num_key_value_heads, 1);
  EXPECT_TRUE(c->spec.attention_bias);
}

// Mixtures of experts: the flags become config.json's expert keys and the checkpoint has
// every expert under its family's names, which the engine's loader reads back.
TEST_F(MakeModelCommandTest, MixturesOfExpertsWriteEveryExpert) {
  Result r = Run(Small("--arch", "mixtral") + " --experts 4 --experts-per-tok 2 --out " +
                 Path("mx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 of 4 experts"));
  StatusOr<ModelConfig> c = LoadModelConfig(Path("mx"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kMixtral);
  EXPECT_EQ(c->spec.num_experts, 4);
  EXPECT_EQ(c->spec.ExpertWidth(), 96);
  StatusOr<SafetensorsFile> w = SafetensorsFile::Open(Path("mx"));
  ASSERT_TRUE(w.ok()) << w.status().message();
  const int64_t router[] = {4, 64}, w1[] = {96, 64}, w2[] = {64, 96};
  EXPECT_TRUE(w->Get("model.layers.2.block_sparse_moe.gate.weight", router).ok());
  EXPECT_TRUE(w->Get("model.layers.2.block_sparse_moe.experts.3.w1.weight", w1).ok());
  EXPECT_TRUE(w->Get("model.layers.2.block_sparse_moe.experts.3.w2.weight", w2).ok());
  EXPECT_EQ(w->Find("model.layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_TRUE(LoadModelWeights(Path("mx")).ok());

  r = Run(Small("--arch", "qwen2_moe") + " --experts 6 --experts-per-tok 3 --moe-intermediate 32 "
          "--shared-expert-intermediate 48 --out " + Path("qm"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  c = LoadModelConfig(Path("qm"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->family, ModelFamily::kQwen2Moe);
  EXPECT_EQ(c->spec.ExpertWidth(), 32);
  EXPECT_EQ(c->spec.shared_expert_intermediate_size, 48);
  EXPECT_FALSE(c->norm_topk_prob);  // not asked for: Qwen's default
  w = SafetensorsFile::Open(Path("qm"));
  ASSERT_TRUE(w.ok());
  const int64_t shared_gate[] = {1, 64}, shared_down[] = {64, 48}, expert_up[] = {32, 64};
  EXPECT_TRUE(w->Get("model.layers.1.mlp.shared_expert_gate.weight", shared_gate).ok());
  EXPECT_TRUE(w->Get("model.layers.1.mlp.shared_expert.down_proj.weight", shared_down).ok());
  EXPECT_TRUE(w->Get("model.layers.1.mlp.experts.5.up_proj.weight", expert_up).ok());
  EXPECT_NE(w->Find("model.layers.1.self_attn.q_proj.bias"), nullptr);
  EXPECT_TRUE(LoadModelWeights(Path("qm")).ok());
}

TEST_F(MakeModelCommandTest, BadFlagsExitTwoWithAMessage) {
  const std::string out = " --out " + Path("x");
  const struct {
    std::string args, message;
  } cases[] = {
      {kSmall, "--out is required"},
      {"--layers 1" + out, "--arch (or --from) is required"},
      {Small("--arch", "gpt2") + out,
       "--arch: 'gpt2' is not one of llama, mistral, qwen2, mixtral, qwen2_moe"},
      {Small("--arch", "mixtral") + " --experts 4" + out,
       "--experts-per-tok is required for --arch mixtral"},
      {Small("--arch", "mixtral") + " --experts 4 --experts-per-tok 5" + out,
       "--experts-per-tok 5 exceeds --experts 4"},
      {Small("--arch", "mixtral") + " --experts 4 --experts-per-tok 2 --norm-topk-prob" + out,
       "--norm-topk-prob does not apply to a mixtral model"},
      {std::string(kSmall) + " --experts 4" + out, "--experts does not apply to a mistral model"},
      {Small("--arch", "qwen2_moe") + " --experts 4 --experts-per-tok 2" + out,
       "--moe-intermediate is required for --arch qwen2_moe"},
      {"--arch llama --layers 1 --hidden 64 --heads 8" + out, "--intermediate is required"},
      {Small("--hidden", "60") + out, "--hidden 60 is not divisible by --heads 8"},
      {Small("--kv-heads", "3") + out, "--kv-heads 3 must divide --heads 8"},
      {Small("--layers", "0") + out, "--layers must be a positive integer"},
      {std::string(kSmall) + " --dtype int8" + out, "--dtype: 'int8' is not one of f32, f16, bf16"},
      {std::string(kSmall) + " --shards 1000" + out, "shards 1000 is not in [1, 30]: each shard holds at least one of the model's 30 tensors"},
      {std::string(kSmall) + " --shards 0" + out, "shards 0 is not in [1, 30]"},
      {"--from llama-9b" + out, "--from: Unable to find model 'llama-9b'"},
      {"--from mistral-7b --arch qwen2" + out, "--arch qwen2 conflicts with --from mistral-7b"},
      {std::string(kSmall) + " --bogus" + out, "unrecognised option '--bogus'"},
      {std::string(kSmall) + " --seed -1" + out, "--seed: '-1' is not a whole number in [0, 2^64-1]"},
      {std::string(kSmall) + " --seed 1.5" + out, "--seed: '1.5' is not a whole number"},
      // Sizes past the model bounds, or past the disk, before anything is allocated (these
      // two ended in std::bad_alloc).
      {std::string(kSmall) + " --head-dim 2000000000" + out,
       "key 'head_dim': 2000000000 is out of range: must be in [0, 16384]"},
      {"--arch llama --layers 4096 --hidden 65536 --heads 8 --intermediate 64 --vocab 300" + out,
       "the model's weights: "},
  };
  for (const auto& c : cases) {
    const Result r = Run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
  }
  EXPECT_EQ(Run("--help").exit_code, 0);
}

}  // namespace
}  // namespace servelab
