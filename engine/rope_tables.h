#pragma once
// RoPE's inverse frequencies for a model (its rope_theta, head_dim and llama3 scaling):
// computed once per runner on the host, read by the RoPE kernels (CPU and CUDA alike).
#include <vector>

#include "engine/model_config.h"

namespace servelab {

std::vector<float> ModelRopeInvFreq(const ModelConfig& config);

}  // namespace servelab
