// Preparing an experiment and choosing its backend, as `run`, `sweep` and `compare` do.
#include "cli/run_experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "driver/config_yaml.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

// Every experiment the repository ships loads, validates, prepares and gets its backend
// (catalog names, key spellings, ranges, the model fits): none rots when a key is renamed
// or a default changes.
TEST(ShippedExperimentsTest, EveryExperimentYamlChecksOut) {
  const std::filesystem::path root = std::filesystem::path(SERVELAB_SOURCE_DIR) / "experiments";
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".yaml") continue;
    // What device runs brought back (model files, resolved configs): not experiments.
    if (entry.path().string().find("/experiments/results/") != std::string::npos) continue;
    SCOPED_TRACE(entry.path().string());
    auto config = LoadExperiment(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status().message();
#if !SERVELAB_HAS_CUDA
    if (config->backend == BackendKind::kEngine && config->engine.device == EngineDevice::kCuda) {
      continue;  // needs a CUDA build
    }
#endif
    const Status checked_out = CheckExperiment(*config);
    EXPECT_TRUE(checked_out.ok()) << checked_out.message();
    ++checked;
  }
  EXPECT_GE(checked, 10);  // quickstart, engine_cpu, the policy set, ...
}

TEST(ChooseBackendTest, SimChecksTheMemoryAndEngineNeedsItsSection) {
  auto config = ParseExperiment("model: llama-2-70b\nhardware: {gpu: a100-80gb}\n"
                                "workload: {num_requests: 1}\n",
                                "exp.yaml", "/");
  ASSERT_TRUE(config.ok());
  EXPECT_THAT(CheckExperiment(*config).message(), HasSubstr("does not fit on a100-80gb x1"));
  config->backend = BackendKind::kEngine;
  EXPECT_THAT(CheckExperiment(*config).message(),
              HasSubstr("backend: engine needs an `engine` section"));
  // The CPU engine runs a mixture of experts; the CUDA one and DeepSeek's shape are refused
  // before any model is loaded.
  auto moe = ParseExperiment("model: mixtral-8x7b\nhardware: {gpu: h100-80gb, tensor_parallel: 2}\n"
                             "workload: {num_requests: 1}\nbackend: engine\n"
                             "engine: {model_path: /nonexistent, device: cuda}\n",
                             "exp.yaml", "/");
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  EXPECT_THAT(CheckExperiment(*moe).message(),
              HasSubstr("exp.yaml:5: engine.device: mixtral-8x7b is a mixture of experts, which "
                        "the CUDA runner does not run yet"));
  moe->backend = BackendKind::kSim;
  EXPECT_TRUE(CheckExperiment(*moe).ok()) << CheckExperiment(*moe).message();
  auto deepseek = ParseExperiment("model: deepseek-v3\nhardware: {gpu: h200-141gb, tensor_parallel: 8}\n"
                                  "workload: {num_requests: 1}\nbackend: engine\n"
                                  "engine: {model_path: /nonexistent, device: cpu}\n",
                                  "exp.yaml", "/");
  ASSERT_TRUE(deepseek.ok()) << deepseek.status().message();
  EXPECT_THAT(CheckExperiment(*deepseek).message(),
              HasSubstr("exp.yaml:1: model: deepseek-v3 has latent attention"));
  auto cost = ParseExperiment("model: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                              "workload: {num_requests: 1}\ncost_model: {type: linear, x: 1}\n",
                              "exp.yaml", "/");
  ASSERT_TRUE(cost.ok());
  EXPECT_THAT(CheckExperiment(*cost).message(),
              HasSubstr("exp.yaml:4: cost_model: unknown parameter 'x' for 'linear'"));
}

}  // namespace
}  // namespace servelab
