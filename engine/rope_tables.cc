#include "engine/rope_tables.h"

#include <optional>

#include "kernels/rope.h"

namespace servelab {

std::vector<float> ModelRopeInvFreq(const ModelConfig& config) {
  std::optional<kernels::Llama3RopeScaling> llama3;
  const RopeScaling& s = config.rope_scaling;
  if (s.type == RopeScaling::Type::kLlama3) {
    llama3 = kernels::Llama3RopeScaling{s.factor, s.low_freq_factor, s.high_freq_factor,
                                        s.original_max_position_embeddings};
  }
  return kernels::RopeInvFreq(config.spec.HeadDim(), config.spec.rope_theta, llama3);
}

}  // namespace servelab
