#pragma once
// The CUDA runner's weights, bf16 on the device: from a loaded checkpoint (ModelWeights,
// f32 on the host, rounded to bf16 once), straight from a checkpoint's files, or seeded
// random values generated in place. q, k and v are stacked into one projection (biases
// likewise) and gate and up into another, so a layer runs one GEMM for each.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/cuda/device_memory.h"
#include "engine/model_config.h"
#include "engine/model_weights.h"
#include "engine/safetensors.h"
#include "engine/weight_layout.h"

namespace servelab::engine_cuda {

using bf16 = __nv_bfloat16;

struct LayerPointers {
  // q_proj, k_proj and v_proj stacked ([qd + 2 kvd, h]; biases likewise): one GEMM.
  bf16 *qkv_proj = nullptr, *o_proj = nullptr;
  bf16 *qkv_bias = nullptr, *o_bias = nullptr;  // null when the model has none
  bf16 *gate_up_proj = nullptr, *down_proj = nullptr;  // gate rows, then up rows
  bf16 *input_norm = nullptr, *post_attention_norm = nullptr;
};

class DeviceWeights {
 public:
  // Room for every tensor of `config` (tied embeddings: the LM head is embed).
  Status Allocate(const ModelConfig& config);
  // Copies `weights` (the same config) to the device, rounded to bf16.
  Status Upload(const ModelWeights& weights);
  // Every tensor HfWeights names, checked against its shape; bf16 bytes go to the device
  // as they are (no float32 copy of the model on the host), F32 and F16 are rounded to
  // bf16 as ModelWeights + Upload would round them (the same bits).
  Status UploadCheckpoint(const SafetensorsFile& file);
  // Seeded values on the device, each tensor its own stream in a fixed order: linear
  // weights and embeddings mean 0, `init_std`; norm weights mean 1, `init_std`.
  Status Randomize(uint64_t seed, double init_std, cudaStream_t stream);

  int64_t Bytes() const { return bytes_; }  // bf16 bytes of every tensor (tied: once)
  const bf16* Embed() const { return embed_; }
  const bf16* LmHead() const { return lm_head_; }
  const bf16* FinalNorm() const { return final_norm_; }
  const std::vector<LayerPointers>& Layers() const { return layers_; }

 private:
  // Where checkpoint tensor `t` goes on the device, by its role.
  bf16* Destination(const WeightTensor& t) const;

  ModelConfig config_;
  DeviceArena memory_;
  int64_t bytes_ = 0;
  bf16* embed_ = nullptr;
  bf16* lm_head_ = nullptr;  // embed_ when tied
  bf16* final_norm_ = nullptr;
  std::vector<LayerPointers> layers_;
};

}  // namespace servelab::engine_cuda
