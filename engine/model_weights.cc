#include "engine/model_weights.h"

#include <map>
#include <string>

#include "engine/weight_layout.h"

namespace servelab {
namespace {

// Reads tensors by name, checked against the shapes the layout expects.
class TensorReader {
 public:
  TensorReader(const ModelConfig& config, const SafetensorsFile& file) : file_(file) {
    for (TensorSpec& spec : HfWeightLayout(config, DType::kFp32)) {
      expected_.emplace(spec.name, std::move(spec.shape));
    }
  }

  // The layout's tensor `name`, decoded into `out` (resized to its element count).
  Status Read(const std::string& name, float* out_begin, int64_t out_size) const {
    auto it = expected_.find(name);
    SERVELAB_CHECK_MSG(it != expected_.end(), "not in the weight layout: " + name);
    StatusOr<const TensorView*> view = file_.Get(name, it->second);
    if (!view.ok()) {
      if (view.status().code() == StatusCode::kNotFound) {
        return NotFound(view.status().message() + " (expected shape " + ShapeString(it->second) +
                        ")");
      }
      return view.status();
    }
    SERVELAB_CHECK((*view)->NumElements() == out_size);
    ToFloat32(**view, std::span<float>(out_begin, static_cast<size_t>(out_size)));
    return Status::Ok();
  }
  Status Read(const std::string& name, int64_t rows, int64_t cols, RowMatrix& out) const {
    out.resize(rows, cols);
    return Read(name, out.data(), out.size());
  }
  Status Read(const std::string& name, int64_t size, Eigen::RowVectorXf& out) const {
    out.resize(size);
    return Read(name, out.data(), out.size());
  }
  Status Read(const std::string& name, int64_t size, std::vector<float>& out) const {
    out.resize(static_cast<size_t>(size));
    return Read(name, out.data(), size);
  }

 private:
  const SafetensorsFile& file_;
  std::map<std::string, std::vector<int64_t>> expected_;
};

Status LoadLayer(const ModelConfig& config, const TensorReader& reader, int32_t index,
                 LayerWeights& layer) {
  const ModelSpec& s = config.spec;
  const int64_t h = s.hidden_size, q = s.QDim(), kv = s.KvDim(), inter = s.intermediate_size;
  const std::string p = "model.layers." + std::to_string(index) + ".";
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.q_proj.weight", q, h, layer.q_proj));
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.k_proj.weight", kv, h, layer.k_proj));
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.v_proj.weight", kv, h, layer.v_proj));
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.o_proj.weight", h, q, layer.o_proj));
  if (s.attention_bias) {
    SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.q_proj.bias", q, layer.q_bias));
    SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.k_proj.bias", kv, layer.k_bias));
    SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.v_proj.bias", kv, layer.v_bias));
  }
  if (config.o_proj_bias) {
    SERVELAB_RETURN_IF_ERROR(reader.Read(p + "self_attn.o_proj.bias", h, layer.o_bias));
  }
  // gate rows then up rows, in one [2I, h] matrix.
  layer.gate_up_proj.resize(2 * inter, h);
  SERVELAB_RETURN_IF_ERROR(
      reader.Read(p + "mlp.gate_proj.weight", layer.gate_up_proj.data(), inter * h));
  SERVELAB_RETURN_IF_ERROR(
      reader.Read(p + "mlp.up_proj.weight", layer.gate_up_proj.data() + inter * h, inter * h));
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "mlp.down_proj.weight", h, inter, layer.down_proj));
  SERVELAB_RETURN_IF_ERROR(reader.Read(p + "input_layernorm.weight", h, layer.input_norm));
  SERVELAB_RETURN_IF_ERROR(
      reader.Read(p + "post_attention_layernorm.weight", h, layer.post_attention_norm));
  return Status::Ok();
}

}  // namespace

int64_t ModelWeights::NumFloats() const {
  int64_t n = embed_tokens.size() + lm_head.size() + static_cast<int64_t>(final_norm.size());
  for (const LayerWeights& l : layers) {
    n += l.q_proj.size() + l.k_proj.size() + l.v_proj.size() + l.o_proj.size() + l.q_bias.size() +
         l.k_bias.size() + l.v_bias.size() + l.o_bias.size() + l.gate_up_proj.size() +
         l.down_proj.size() +
         static_cast<int64_t>(l.input_norm.size() + l.post_attention_norm.size());
  }
  return n;
}

StatusOr<ModelWeights> LoadModelWeights(const ModelConfig& config, const SafetensorsFile& file) {
  SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(config, config.spec.name + "/config.json"));
  const ModelSpec& s = config.spec;
  const TensorReader reader(config, file);
  ModelWeights w;
  w.config = config;
  SERVELAB_RETURN_IF_ERROR(
      reader.Read("model.embed_tokens.weight", s.vocab_size, s.hidden_size, w.embed_tokens));
  w.layers.resize(static_cast<size_t>(s.num_hidden_layers));
  for (int32_t i = 0; i < s.num_hidden_layers; ++i) {
    SERVELAB_RETURN_IF_ERROR(LoadLayer(config, reader, i, w.layers[static_cast<size_t>(i)]));
  }
  SERVELAB_RETURN_IF_ERROR(reader.Read("model.norm.weight", s.hidden_size, w.final_norm));
  if (!s.tie_word_embeddings) {
    SERVELAB_RETURN_IF_ERROR(reader.Read("lm_head.weight", s.vocab_size, s.hidden_size, w.lm_head));
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
