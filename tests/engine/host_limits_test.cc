// Sizes an input asks for are checked against what the machine holds before anything is
// allocated (issue 15): a config.json whose shapes imply terabytes, a make-model shape
// larger than the disk, a KV pool larger than memory. Each of these ended in
// std::bad_alloc before; each is now a bad-input error that says what it needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/host_memory.h"
#include "engine/cpu_model_runner.h"
#include "engine/random_model.h"
#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(HostLimitsTest, MemoryAndDiskChecksCompareWithTheMachine) {
  const int64_t memory = HostMemoryBytes();
  ASSERT_GT(memory, int64_t{1} << 20);  // Linux reports its pages
  EXPECT_TRUE(CheckFitsHostMemory(static_cast<double>(memory) / 2, "half").ok());
  const Status over = CheckFitsHostMemory(static_cast<double>(memory) * 2, "twice the memory");
  EXPECT_TRUE(over.IsBadInput());
  EXPECT_THAT(over.message(), HasSubstr("twice the memory: "));
  EXPECT_THAT(over.message(), HasSubstr("more than this machine's"));
  TempDir dir;
  EXPECT_TRUE(CheckFitsDisk(4096, dir / "a/b/c", "a page").ok());  // folders not there yet
  const Status disk = CheckFitsDisk(1e30, dir / "a/b/c", "the weights");
  EXPECT_TRUE(disk.IsBadInput());
  EXPECT_THAT(disk.message(), HasSubstr("free on " + dir.path().string()));
}

TEST(HostLimitsTest, ConfigSizesPastModelSpecBoundsAreRefusedAtParse) {
  const Status s = ParseModelConfig(
                       R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
                           "head_dim": 1073741824, "intermediate_size": 64,
                           "num_hidden_layers": 1, "vocab_size": 100})",
                       "m/config.json")
                       .status();
  EXPECT_TRUE(s.IsBadInput());
  EXPECT_THAT(s.message(),
              HasSubstr("m/config.json: key 'head_dim': 1073741824 is out of range: must be in "
                        "[0, 16384]"));
}

TEST(HostLimitsTest, ShapesAreCheckedAgainstTheCheckpointBeforeAllocating) {
  // A small checkpoint whose config.json claims vocab 2^24 x hidden 2^20: 2^44 floats
  // (64 TiB) of embeddings. The tensor check refuses it before any allocation.
  TempDir dir;
  ModelConfig small = testing::TinyConfig();
  ASSERT_TRUE(WriteRandomModel(RandomModelOptions{small, 1}, dir.path()).ok());
  ModelConfig claimed = small;
  claimed.spec.vocab_size = 1 << 24;
  claimed.spec.hidden_size = 1 << 20;
  claimed.spec.head_dim = 16;
  testing::WriteBytes(dir / "config.json", ModelConfigJson(claimed));
  const StatusOr<ModelWeights> weights = LoadModelWeights(dir.path());
  ASSERT_FALSE(weights.ok());
  EXPECT_TRUE(weights.status().IsBadInput());
  EXPECT_THAT(weights.status().message(),
              HasSubstr("'model.embed_tokens.weight' has shape [97, 64], expected [16777216, "
                        "1048576]"));
}

TEST(HostLimitsTest, RandomModelLargerThanTheDiskWritesNothing) {
  TempDir dir;
  ModelConfig huge = testing::TinyConfig();
  huge.spec.vocab_size = 1 << 24;
  huge.spec.hidden_size = 1 << 16;
  huge.spec.head_dim = 16;
  huge.spec.num_hidden_layers = 1 << 10;  // ~2^45 bytes of bf16 layers: 32 TiB
  huge.torch_dtype = DType::kBf16;
  const StatusOr<WrittenModel> written =
      WriteRandomModel(RandomModelOptions{huge, 1}, dir / "model");
  ASSERT_FALSE(written.ok());
  EXPECT_TRUE(written.status().IsBadInput());
  EXPECT_THAT(written.status().message(), HasSubstr("the model's weights: "));
  EXPECT_FALSE(fs::exists(dir / "model"));
}

TEST(HostLimitsTest, KvPoolLargerThanMemoryIsRefused) {
  TempDir dir;
  auto weights = testing::WriteAndLoad(testing::TinyConfig(), dir.path());
  ASSERT_NE(weights, nullptr);
  CpuRunnerOptions options;
  options.kv_cache_bytes = HostMemoryBytes() * 4;
  const auto runner = CpuModelRunner::Create(weights, options);
  ASSERT_FALSE(runner.ok());
  EXPECT_TRUE(runner.status().IsBadInput());
  EXPECT_THAT(runner.status().message(), HasSubstr("cpu runner: the KV cache ("));
}

}  // namespace
}  // namespace servelab
