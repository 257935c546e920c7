// The engine's wiring (engine/engine_setup.h): engine.warmup runs the widest steps before
// the first one served, and only then.
#include "engine/engine_setup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "driver/config_yaml.h"
#include "engine/cpu_model_runner.h"
#include "engine/engine_backend.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

StatusOr<ExperimentConfig> TinyEngine(const std::string& engine_options, const fs::path& dir) {
  return ParseExperiment(
      "name: warm\nbackend: engine\n"
      "engine: {model_path: m, create_model: true, kv_cache_gib: 0.001" + engine_options + "}\n"
      "model: {base: llama-2-7b, name: m, hidden_size: 32, num_hidden_layers: 1,\n"
      "        num_attention_heads: 2, num_key_value_heads: 2, intermediate_size: 64,\n"
      "        vocab_size: 61, max_position_embeddings: 256}\n"
      "hardware: {gpu: a10}\nscheduler: {max_num_seqs: 4, max_num_batched_tokens: 40}\n",
      (dir / "exp.yaml").string(), dir.string());
}

// Nonzero floats in each of the first `blocks` blocks of the first layer's K cache of
// `backend`'s runner.
std::vector<int64_t> WrittenKv(Backend& backend, int32_t blocks) {
  auto& lent = dynamic_cast<LentRunner&>(dynamic_cast<EngineBackend&>(backend).Runner());
  auto& runner = dynamic_cast<CpuModelRunner&>(lent.Runner());
  const std::span<const float> k = runner.KCache(0);
  std::vector<int64_t> nonzero;
  for (int32_t b = 0; b < blocks; ++b) {
    const auto block = k.subspan(static_cast<size_t>(b * runner.BlockFloats()),
                                 static_cast<size_t>(runner.BlockFloats()));
    nonzero.push_back(std::count_if(block.begin(), block.end(), [](float x) { return x != 0.0f; }));
  }
  return nonzero;
}

// The same, in the backend the experiment's engine factory makes.
std::vector<int64_t> WrittenKv(const std::string& engine_options, const fs::path& dir, int32_t blocks) {
  auto config = TinyEngine(engine_options, dir);
  EXPECT_TRUE(config.ok()) << config.status().message();
  if (!config.ok()) return {};
  auto factory = MakeEngineBackendFactory(*config);
  EXPECT_TRUE(factory.ok()) << factory.status().message();
  if (!factory.ok()) return {};
  auto backend = (*factory)(0);
  EXPECT_TRUE(backend.ok()) << backend.status().message();
  if (!backend.ok()) return {};
  return WrittenKv(**backend, blocks);
}

TEST(EngineSetupTest, WarmUpWritesTheWidestChunkBeforeServingUnlessTurnedOff) {
  const fs::path dir = fs::temp_directory_path() / ("servelab_engine_setup_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A chunk of 40 tokens fills blocks 0-2 of 16 (the last one to position 7), then 4
  // sequences of 10 take a block each from 0: K of every position written is nonzero
  // (random weights), the block after them untouched.
  const std::vector<int64_t> warm = WrittenKv("", dir, 5);
  ASSERT_EQ(warm.size(), 5u);
  const int64_t per_token = warm[0] / 16;
  EXPECT_EQ(per_token, 32);  // 2 KV heads of 16
  EXPECT_EQ(warm, (std::vector<int64_t>{16 * 32, 16 * 32, 10 * 32, 10 * 32, 0}));
  EXPECT_EQ(WrittenKv(", warmup: false", dir, 5), std::vector<int64_t>(5, 0));
  fs::remove_all(dir);
}

// hardware.num_gpu_blocks, when set, is the engine's pool whatever engine.kv_cache_gib
// holds (validate pins it so that every run serves with the first one's pool).
TEST(EngineSetupTest, NumGpuBlocksSetsTheEnginePool) {
  const fs::path dir = fs::temp_directory_path() / ("servelab_engine_blocks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto pool = [&](const std::string& hardware) -> int32_t {
    auto config = ParseExperiment(
        "name: blocks\nbackend: engine\n"
        "engine: {model_path: m, create_model: true, kv_cache_gib: 0.001}\n"
        "model: {base: llama-2-7b, name: m, hidden_size: 32, num_hidden_layers: 1,\n"
        "        num_attention_heads: 2, num_key_value_heads: 2, intermediate_size: 64,\n"
        "        vocab_size: 61, max_position_embeddings: 256}\n"
        "hardware: {gpu: a10" + hardware + "}\nscheduler: {max_num_seqs: 4, max_num_batched_tokens: 40}\n",
        (dir / "exp.yaml").string(), dir.string());
    EXPECT_TRUE(config.ok()) << config.status().message();
    if (!config.ok()) return -1;
    auto factory = MakeEngineBackendFactory(*config);
    if (!factory.ok()) return -1;
    auto backend = (*factory)(0);
    EXPECT_TRUE(backend.ok()) << backend.status().message();
    return backend.ok() ? (*backend)->Capacity().num_gpu_blocks : -1;
  };
  // 0.001 GiB in blocks of 16 tokens x 32 K and 32 V floats (4 KiB): 262 blocks.
  EXPECT_EQ(pool(""), 262);
  EXPECT_EQ(pool(", num_gpu_blocks: 7"), 7);
  EXPECT_EQ(pool(", num_gpu_blocks: 1000"), 1000);
  fs::remove_all(dir);
}

// One model's backends serve on the runner it keeps (engine/idle_runners.h), as validate's
// runs of every load do: what one backend's warm-up wrote is in the KV pool the next one
// serves with, a pool pinned to its blocks is the same runner, and a backend made while
// the first is held (another replica) has a runner of its own.
TEST(EngineSetupTest, AModelsBackendsServeOnTheRunnerItKeeps) {
  const fs::path dir = fs::temp_directory_path() / ("servelab_engine_kept_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto warm = TinyEngine("", dir);
  auto cold = TinyEngine(", warmup: false", dir);
  ASSERT_TRUE(warm.ok() && cold.ok());
  auto model = EngineModel::Load(*warm);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::vector<int64_t> warmed{16 * 32, 16 * 32, 10 * 32, 10 * 32, 0};
  int32_t blocks = 0;
  {
    auto factory = MakeEngineBackendFactory(*warm, *model);
    ASSERT_TRUE(factory.ok());
    auto backend = (*factory)(0);
    ASSERT_TRUE(backend.ok());
    EXPECT_EQ(WrittenKv(**backend, 5), warmed);
    blocks = (*backend)->Capacity().num_gpu_blocks;
  }
  {
    auto pinned = MakeEngineBackendFactory(*cold, (*model)->WithKvBlocks(blocks));
    ASSERT_TRUE(pinned.ok());
    auto backend = (*pinned)(0);
    ASSERT_TRUE(backend.ok());
    EXPECT_EQ(WrittenKv(**backend, 5), warmed);  // not warmed: the first backend's runner
  }
  auto factory = MakeEngineBackendFactory(*cold, *model);
  ASSERT_TRUE(factory.ok());
  auto kept = (*factory)(0);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(WrittenKv(**kept, 5), warmed);
  auto second = (*factory)(1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(WrittenKv(**second, 5), std::vector<int64_t>(5, 0));  // a runner of its own
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servelab
