#include "engine/model_weights.h"

#include <string>

#include "core/host_memory.h"
#include "engine/weight_layout.h"

namespace servelab {
namespace {

template <class Matrix>
std::span<float> All(Matrix& m) {
  return {m.data(), static_cast<size_t>(m.size())};
}

void AllocateSwiGlu(SwiGluWeights& mlp, int64_t width, int64_t h) {
  mlp.gate_up_proj.setZero(2 * width, h);
  mlp.down_proj.setZero(h, width);
}

// Where a SwiGLU MLP's gate, up or down projection lives: gate and up are the two halves
// of gate_up_proj.
enum class SwiGluPart : uint8_t { kGate, kUp, kDown };
std::span<float> PartOf(SwiGluWeights& mlp, SwiGluPart part) {
  const auto half = static_cast<size_t>(mlp.gate_up_proj.size() / 2);
  switch (part) {
    case SwiGluPart::kGate: return All(mlp.gate_up_proj).first(half);
    case SwiGluPart::kUp: return All(mlp.gate_up_proj).subspan(half);
    case SwiGluPart::kDown: return All(mlp.down_proj);
  }
  return {};
}

int64_t SwiGluFloats(const SwiGluWeights& mlp) {
  return mlp.gate_up_proj.size() + mlp.down_proj.size();
}

}  // namespace

void ModelWeights::Allocate(const ModelConfig& model) {
  config = model;
  const ModelSpec& s = config.spec;
  const int64_t h = s.hidden_size, q = s.QDim(), kv = s.KvDim(), inter = s.intermediate_size;
  embed_tokens.setZero(s.vocab_size, h);
  lm_head.resize(s.tie_word_embeddings ? 0 : s.vocab_size, s.tie_word_embeddings ? 0 : h);
  lm_head.setZero();
  final_norm.assign(static_cast<size_t>(h), 0.0f);
  layers.assign(static_cast<size_t>(s.num_hidden_layers), LayerWeights{});
  for (LayerWeights& l : layers) {
    l.q_proj.setZero(q, h);
    l.k_proj.setZero(kv, h);
    l.v_proj.setZero(kv, h);
    l.o_proj.setZero(h, q);
    if (s.attention_bias) {
      l.q_bias.setZero(q);
      l.k_bias.setZero(kv);
      l.v_bias.setZero(kv);
    }
    if (config.o_proj_bias) l.o_bias.setZero(h);
    if (s.IsMoe()) {
      l.router.setZero(s.num_experts, h);
      l.experts.assign(static_cast<size_t>(s.num_experts), SwiGluWeights{});
      for (SwiGluWeights& e : l.experts) AllocateSwiGlu(e, s.ExpertWidth(), h);
      if (s.shared_expert_intermediate_size > 0) {
        AllocateSwiGlu(l.shared_expert, s.shared_expert_intermediate_size, h);
        l.shared_expert_gate.setZero(h);
      }
    } else {
      AllocateSwiGlu(l.mlp, inter, h);
    }
    l.input_norm.assign(static_cast<size_t>(h), 0.0f);
    l.post_attention_norm.assign(static_cast<size_t>(h), 0.0f);
  }
}

std::span<float> ModelWeights::Of(const WeightTensor& t) {
  switch (t.role) {
    case WeightRole::kEmbedTokens: return All(embed_tokens);
    case WeightRole::kFinalNorm: return final_norm;
    case WeightRole::kLmHead: return All(lm_head);
    default: break;
  }
  SERVELAB_CHECK(t.layer >= 0 && static_cast<size_t>(t.layer) < layers.size());
  LayerWeights& l = layers[static_cast<size_t>(t.layer)];
  switch (t.role) {
    case WeightRole::kQProj: return All(l.q_proj);
    case WeightRole::kKProj: return All(l.k_proj);
    case WeightRole::kVProj: return All(l.v_proj);
    case WeightRole::kOProj: return All(l.o_proj);
    case WeightRole::kQBias: return All(l.q_bias);
    case WeightRole::kKBias: return All(l.k_bias);
    case WeightRole::kVBias: return All(l.v_bias);
    case WeightRole::kOBias: return All(l.o_bias);
    // gate rows then up rows, in one [2I, h] matrix: one GEMM yields what SiluAndMul reads.
    case WeightRole::kGateProj: return PartOf(l.mlp, SwiGluPart::kGate);
    case WeightRole::kUpProj: return PartOf(l.mlp, SwiGluPart::kUp);
    case WeightRole::kDownProj: return PartOf(l.mlp, SwiGluPart::kDown);
    case WeightRole::kRouter: return All(l.router);
    case WeightRole::kSharedGateProj: return PartOf(l.shared_expert, SwiGluPart::kGate);
    case WeightRole::kSharedUpProj: return PartOf(l.shared_expert, SwiGluPart::kUp);
    case WeightRole::kSharedDownProj: return PartOf(l.shared_expert, SwiGluPart::kDown);
    case WeightRole::kSharedExpertGate: return All(l.shared_expert_gate);
    case WeightRole::kInputNorm: return l.input_norm;
    case WeightRole::kPostAttentionNorm: return l.post_attention_norm;
    default: break;
  }
  if (t.expert >= 0 && static_cast<size_t>(t.expert) < l.experts.size()) {
    SwiGluWeights& e = l.experts[static_cast<size_t>(t.expert)];
    switch (t.role) {
      case WeightRole::kExpertGateProj: return PartOf(e, SwiGluPart::kGate);
      case WeightRole::kExpertUpProj: return PartOf(e, SwiGluPart::kUp);
      case WeightRole::kExpertDownProj: return PartOf(e, SwiGluPart::kDown);
      default: break;
    }
  }
  SERVELAB_CHECK_MSG(false, "no place for " + t.spec.name);
  return {};
}

std::span<const float> ModelWeights::Of(const WeightTensor& t) const {
  return const_cast<ModelWeights*>(this)->Of(t);
}

int64_t ModelWeights::NumFloats() const {
  int64_t n = embed_tokens.size() + lm_head.size() + static_cast<int64_t>(final_norm.size());
  for (const LayerWeights& l : layers) {
    n += l.q_proj.size() + l.k_proj.size() + l.v_proj.size() + l.o_proj.size() + l.q_bias.size() +
         l.k_bias.size() + l.v_bias.size() + l.o_bias.size() + SwiGluFloats(l.mlp) +
         l.router.size() + SwiGluFloats(l.shared_expert) +
         l.shared_expert_gate.size() +
         static_cast<int64_t>(l.input_norm.size() + l.post_attention_norm.size());
    for (const SwiGluWeights& e : l.experts) n += SwiGluFloats(e);
  }
  return n;
}

StatusOr<ModelWeights> LoadModelWeights(const ModelConfig& config, const SafetensorsFile& file) {
  SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(config, config.spec.name + "/config.json"));
  // Every tensor is found with its shape before anything is allocated: the checkpoint's
  // own size then bounds what config.json's sizes ask for, and the float32 copy must fit.
  const std::vector<WeightTensor> layout = HfWeights(config, DType::kFp32);
  std::vector<const TensorView*> views;
  double floats = 0;
  for (const WeightTensor& t : layout) {
    StatusOr<const TensorView*> view = file.Get(t.spec.name, t.spec.shape);
    if (!view.ok()) {
      if (view.status().code() == StatusCode::kNotFound) {
        return NotFound(view.status().message() + " (expected shape " +
                        ShapeString(t.spec.shape) + ")");
      }
      return view.status();
    }
    views.push_back(*view);
    floats += static_cast<double>((*view)->NumElements());
  }
  SERVELAB_RETURN_IF_ERROR(CheckFitsHostMemory(
      floats * sizeof(float), config.spec.name + ": the float32 copy of its weights"));
  ModelWeights w;
  w.Allocate(config);
  for (size_t i = 0; i < layout.size(); ++i) {
    const std::span<float> place = w.Of(layout[i]);
    SERVELAB_CHECK(static_cast<int64_t>(place.size()) == views[i]->NumElements());
    ToFloat32(*views[i], place);
  }
  return w;
}

StatusOr<ModelWeights> LoadModelWeights(const std::filesystem::path& dir) {
  StatusOr<ModelConfig> config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir);
  if (!file.ok()) return file.status();
  return LoadModelWeights(*config, *file);
}

}  // namespace servelab
