#include "engine/cuda/device_weights.h"

#include <string>

#include "engine/cuda/runner_kernels.h"
#include "kernels/cuda/bf16.h"

namespace servelab::engine_cuda {

namespace kcuda = kernels::cuda;

Status DeviceWeights::Allocate(const ModelConfig& config) {
  config_ = config;
  const ModelSpec& s = config.spec;
  const bool tied = s.tie_word_embeddings;
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(embed_, int64_t{s.vocab_size} * h, "embed_tokens"));
  if (tied) {
    lm_head_ = embed_;
  } else {
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(lm_head_, int64_t{s.vocab_size} * h, "lm_head"));
  }
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(final_norm_, h, "norm"));
  layers_.resize(static_cast<size_t>(s.num_hidden_layers));
  for (LayerPointers& l : layers_) {
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.qkv_proj, (qd + 2 * kvd) * h, "q/k/v_proj"));
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.o_proj, h * qd, "o_proj"));
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.gate_up_proj, 2 * inter * h, "gate_up_proj"));
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.down_proj, h * inter, "down_proj"));
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.input_norm, h, "input_layernorm"));
    SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.post_attention_norm, h, "post_attention_layernorm"));
    if (s.attention_bias) {
      SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.qkv_bias, qd + 2 * kvd, "q/k/v_proj.bias"));
    }
    if (config.o_proj_bias) SERVELAB_RETURN_IF_ERROR(memory_.Alloc(l.o_bias, h, "o_proj.bias"));
  }
  const int64_t per_layer = (qd * h + 2 * kvd * h + h * qd + 3 * inter * h + 2 * h) +
                            (s.attention_bias ? qd + 2 * kvd : 0) + (config.o_proj_bias ? h : 0);
  bytes_ = 2 * (int64_t{s.vocab_size} * h * (tied ? 1 : 2) + h + per_layer * s.num_hidden_layers);
  return Status::Ok();
}

bf16* DeviceWeights::Destination(const WeightTensor& t) const {
  const ModelSpec& s = config_.spec;
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  switch (t.role) {
    case WeightRole::kEmbedTokens: return embed_;
    case WeightRole::kLmHead: return lm_head_ == embed_ ? nullptr : lm_head_;
    case WeightRole::kFinalNorm: return final_norm_;
    default: break;
  }
  if (t.layer < 0 || static_cast<size_t>(t.layer) >= layers_.size()) return nullptr;
  const LayerPointers& l = layers_[static_cast<size_t>(t.layer)];
  // q, k, v stacked in that order (weights by rows of h, biases by elements); gate then up.
  switch (t.role) {
    case WeightRole::kQProj: return l.qkv_proj;
    case WeightRole::kKProj: return l.qkv_proj + qd * h;
    case WeightRole::kVProj: return l.qkv_proj + (qd + kvd) * h;
    case WeightRole::kOProj: return l.o_proj;
    case WeightRole::kQBias: return l.qkv_bias;
    case WeightRole::kKBias: return l.qkv_bias == nullptr ? nullptr : l.qkv_bias + qd;
    case WeightRole::kVBias: return l.qkv_bias == nullptr ? nullptr : l.qkv_bias + qd + kvd;
    case WeightRole::kOBias: return l.o_bias;
    case WeightRole::kGateProj: return l.gate_up_proj;
    case WeightRole::kUpProj: return l.gate_up_proj + inter * h;
    case WeightRole::kDownProj: return l.down_proj;
    case WeightRole::kInputNorm: return l.input_norm;
    case WeightRole::kPostAttentionNorm: return l.post_attention_norm;
    default: return nullptr;
  }
}

Status DeviceWeights::Upload(const ModelWeights& weights) {
  std::vector<bf16> host;
  for (const WeightTensor& t : HfWeights(config_, DType::kBf16)) {
    bf16* dst = Destination(t);
    SERVELAB_CHECK_MSG(dst != nullptr, "no device place for " + t.spec.name);
    const std::span<const float> src = weights.Of(t);
    host.resize(src.size());
    kcuda::F32ToBf16(host.data(), src.data(), src.size());
    SERVELAB_CUDA_RETURN(
        cudaMemcpy(dst, host.data(), src.size() * sizeof(bf16), cudaMemcpyHostToDevice),
        "uploading " + t.spec.name);
  }
  return Status::Ok();
}

Status DeviceWeights::UploadCheckpoint(const SafetensorsFile& file) {
  std::vector<float> f32;
  std::vector<bf16> host;
  for (const WeightTensor& t : HfWeights(config_, DType::kBf16)) {
    StatusOr<const TensorView*> view = file.Get(t.spec.name, t.spec.shape);
    if (!view.ok()) return view.status();
    bf16* dst = Destination(t);
    SERVELAB_CHECK_MSG(dst != nullptr, "no device place for " + t.spec.name);
    const TensorView& tensor = **view;
    const auto n = static_cast<size_t>(tensor.NumElements());
    const void* src = tensor.data;
    if (tensor.dtype != DType::kBf16) {
      f32.resize(n);
      ToFloat32(tensor, f32);
      host.resize(n);
      kcuda::F32ToBf16(host.data(), f32.data(), n);
      src = host.data();
    }
    SERVELAB_CUDA_RETURN(cudaMemcpy(dst, src, n * sizeof(bf16), cudaMemcpyHostToDevice),
                         "uploading " + t.spec.name);
  }
  return Status::Ok();
}

Status DeviceWeights::Randomize(uint64_t seed, double init_std, cudaStream_t stream) {
  const ModelSpec& s = config_.spec;
  const auto sd = static_cast<float>(init_std);
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  uint64_t tensor = 0;  // each tensor its own stream, in a fixed order
  auto fill = [&](bf16* p, int64_t n, float mean) {
    FillRandomBf16(p, n, seed, tensor++, mean, sd, stream);
  };
  fill(embed_, int64_t{s.vocab_size} * h, 0.0f);
  if (lm_head_ != embed_) fill(lm_head_, int64_t{s.vocab_size} * h, 0.0f);
  fill(final_norm_, h, 1.0f);
  for (LayerPointers& l : layers_) {
    fill(l.qkv_proj, (qd + 2 * kvd) * h, 0.0f);
    fill(l.o_proj, h * qd, 0.0f);
    fill(l.gate_up_proj, 2 * inter * h, 0.0f);
    fill(l.down_proj, h * inter, 0.0f);
    fill(l.input_norm, h, 1.0f);
    fill(l.post_attention_norm, h, 1.0f);
    if (l.qkv_bias != nullptr) fill(l.qkv_bias, qd + 2 * kvd, 0.0f);
    if (l.o_bias != nullptr) fill(l.o_bias, h, 0.0f);
  }
  SERVELAB_CUDA_RETURN(cudaStreamSynchronize(stream), "generating random weights");
  return Status::Ok();
}

}  // namespace servelab::engine_cuda
