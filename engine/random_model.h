#pragma once
// Writes a Hugging Face model folder with seeded random weights: a stand-in checkpoint of
// any shape for engine tests and experiments, with no download. Same options => the same
// bytes in every file.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/model_config.h"

namespace servelab {

struct RandomModelOptions {
  ModelConfig config;      // written as config.json; config.torch_dtype is the stored dtype
  uint64_t seed = 0;
  int32_t shards = 1;      // 1: model.safetensors; N > 1: model-0000k-of-0000N.safetensors
                           // + model.safetensors.index.json. REQUIRES: N <= tensors.
  double init_std = 0.02;  // Linear weights, biases, embeddings: mean 0, this std;
                           // RMSNorm weights: mean 1, this std. The shape is a bell
                           // (sum of 4 uniforms), bounded by +-3.46 std.
};

struct WrittenModel {
  std::vector<std::filesystem::path> files;  // config.json first, then the weights
  int64_t num_params = 0;
  int64_t num_tensors = 0;
  uint64_t weight_bytes = 0;                 // tensor data, headers excluded
};

// Creates `dir` if needed and writes config.json and the weights. Each tensor draws from
// its own stream, Rng(seed, FNV-1a hash of its name), so a tensor's values depend only on
// the seed, its name and its size (a 2-layer model's layer 0 equals a 4-layer model's).
// Removes a stale model.safetensors / model.safetensors.index.json that would shadow
// the files written. InvalidArgument for an invalid config or shard count, or one of
// more than kMaxRandomModelTensors tensors (about num_hidden_layers x (16 + 3 x
// num_experts)); Internal on I/O failure.
inline constexpr int64_t kMaxRandomModelTensors = 1'000'000;
StatusOr<WrittenModel> WriteRandomModel(const RandomModelOptions& options,
                                        const std::filesystem::path& dir);
// WriteRandomModel into a folder of its own beside `dir`, then its files renamed into
// `dir`, weights first and config.json last: a write that fails half way (a full disk,
// an interrupt) leaves a model already at `dir` whole, and a config.json at `dir` always
// comes with its weights, even while several writers make the same model at once (each
// stages its own copy; the same seed writes the same bytes). `files` are `dir`'s.
StatusOr<WrittenModel> WriteRandomModelInto(const RandomModelOptions& options,
                                            const std::filesystem::path& dir);

}  // namespace servelab
