#include "engine/model_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "core/read_file.h"
#include "core/text.h"

namespace servelab {
namespace {

using json = nlohmann::json;

constexpr ModelFamily kFamilies[] = {ModelFamily::kLlama, ModelFamily::kMistral,
                                     ModelFamily::kQwen2, ModelFamily::kMixtral,
                                     ModelFamily::kQwen2Moe};

// The value as JSON text, shortened for a message.
std::string Describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::optional<int64_t> AsInteger(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// Reads typed keys of one JSON object; every message names the file and the key.
class KeyReader {
 public:
  KeyReader(const json& object, const std::string& source, std::string prefix = "")
      : object_(object), source_(source), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool Has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  const json& At(const char* key) const { return object_.at(key); }

  Status Error(const char* key, const std::string& what) const {
    return InvalidArgument(source_ + ": key '" + prefix_ + key + "': " + what);
  }
  Status Missing(const char* key, const char* expected) const {
    return Error(key, std::string("missing (expected ") + expected + ")");
  }

  // A positive integer that fits int32; `*out` is kept when the key is absent and optional.
  Status PositiveInt(const char* key, int32_t* out, bool required) const {
    if (!Has(key)) return required ? Missing(key, "a positive integer") : Status::Ok();
    const std::optional<int64_t> v = AsInteger(At(key));
    if (!v || *v < 1 || *v > std::numeric_limits<int32_t>::max()) {
      return Error(key, "expected a positive integer, got " + Describe(At(key)));
    }
    *out = static_cast<int32_t>(*v);
    return Status::Ok();
  }
  Status PositiveNumber(const char* key, double* out, bool required) const {
    if (!Has(key)) return required ? Missing(key, "a positive number") : Status::Ok();
    const json& value = At(key);
    if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
      return Error(key, "expected a positive number, got " + Describe(value));
    }
    *out = value.get<double>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_boolean()) return Error(key, "expected true or false, got " + Describe(At(key)));
    *out = At(key).get<bool>();
    return Status::Ok();
  }
  Status String(const char* key, std::string* out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_string()) return Error(key, "expected a string, got " + Describe(At(key)));
    *out = At(key).get<std::string>();
    return Status::Ok();
  }

 private:
  const json& object_;
  const std::string& source_;
  std::string prefix_;
};

StatusOr<ModelFamily> ReadFamily(const KeyReader& r) {
  std::string model_type;
  SERVELAB_RETURN_IF_ERROR(r.String("model_type", &model_type));
  std::vector<std::string> architectures;
  if (r.Has("architectures")) {
    const json& list = r.At("architectures");
    bool strings = list.is_array();
    for (const json& a : list) strings = strings && a.is_string();
    if (!strings) {
      return r.Error("architectures", "expected a list of strings, got " + Describe(list));
    }
    for (const json& a : list) architectures.push_back(a.get<std::string>());
  }
  if (model_type.empty()) {
    for (ModelFamily f : kFamilies) {
      for (const std::string& a : architectures) {
        if (a == ArchitectureName(f)) return f;
      }
    }
    return r.Error("model_type", "missing, and no supported class in 'architectures'; valid "
                                 "values are: " + Join(SupportedModelTypes(), ", "));
  }
  for (ModelFamily f : kFamilies) {
    if (model_type != ModelTypeName(f)) continue;
    if (architectures.empty()) return f;
    for (const std::string& a : architectures) {
      if (a == ArchitectureName(f)) return f;
    }
    return r.Error("architectures", "expected a list containing \"" +
                                        std::string(ArchitectureName(f)) + "\" for model_type '" +
                                        model_type + "', got " + Describe(r.At("architectures")));
  }
  return r.Error("model_type", UnknownNameMessage("model_type", model_type, SupportedModelTypes()));
}

Status ReadRopeScaling(const KeyReader& top, const std::string& source, RopeScaling* out) {
  if (!top.Has("rope_scaling")) return Status::Ok();
  const json& object = top.At("rope_scaling");
  if (!object.is_object()) {
    return top.Error("rope_scaling", "expected null or a mapping, got " + Describe(object));
  }
  const KeyReader r(object, source, "rope_scaling.");
  const char* type_key = r.Has("rope_type") ? "rope_type" : "type";
  std::string type;
  SERVELAB_RETURN_IF_ERROR(r.String(type_key, &type));
  if (type == "default") return Status::Ok();
  if (type != "llama3") {
    return r.Error(type_key, type.empty() ? std::string("missing (supported: llama3, default)")
                                          : "'" + type + "' is not supported (supported: "
                                                         "llama3, default)");
  }
  out->type = RopeScaling::Type::kLlama3;
  SERVELAB_RETURN_IF_ERROR(r.PositiveNumber("factor", &out->factor, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveNumber("low_freq_factor", &out->low_freq_factor, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveNumber("high_freq_factor", &out->high_freq_factor, true));
  return r.PositiveInt("original_max_position_embeddings",
                       &out->original_max_position_embeddings, true);
}

Status ReadEosTokenIds(const KeyReader& r, std::vector<int32_t>* out) {
  if (!r.Has("eos_token_id")) return Status::Ok();
  const json& value = r.At("eos_token_id");
  const json list = value.is_array() ? value : json::array({value});
  for (const json& id : list) {
    const std::optional<int64_t> v = AsInteger(id);
    if (!v || *v < 0 || *v > std::numeric_limits<int32_t>::max()) {
      return r.Error("eos_token_id", "expected a non-negative integer or a list of them, got " +
                                         Describe(value));
    }
    out->push_back(static_cast<int32_t>(*v));
  }
  return Status::Ok();
}

Status ReadTorchDType(const KeyReader& r, DType* out) {
  const char* key = r.Has("torch_dtype") ? "torch_dtype" : "dtype";
  std::string name;
  SERVELAB_RETURN_IF_ERROR(r.String(key, &name));
  if (name.empty()) return Status::Ok();
  for (DType d : {DType::kFp32, DType::kFp16, DType::kBf16}) {
    if (name == TorchDTypeName(d)) {
      *out = d;
      return Status::Ok();
    }
  }
  return r.Error(key, "'" + name + "' is not supported (supported: float32, float16, bfloat16)");
}

Status ReadSlidingWindow(const KeyReader& r, ModelFamily family, int32_t* out) {
  if (family == ModelFamily::kLlama) return Status::Ok();
  if (IsQwenFamily(family)) {
    bool use = false;
    SERVELAB_RETURN_IF_ERROR(r.Bool("use_sliding_window", &use));
    if (use) return r.Error("use_sliding_window", "true is not supported (layer-dependent windows)");
    return Status::Ok();
  }
  return r.PositiveInt("sliding_window", out, false);
}

// The expert keys of Mixtral and Qwen2-MoE (model_config.h). Dense families must not
// carry them: a config.json with experts and a dense model_type is a wrong model_type.
Status ReadExperts(const KeyReader& r, ModelFamily family, ModelConfig* config) {
  ModelSpec& s = config->spec;
  if (!IsMoeFamily(family)) {
    for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
      if (r.Has(key) && AsInteger(r.At(key)).value_or(0) > 0) {
        return r.Error(key, "a mixture of experts needs model_type mixtral or qwen2_moe, not " +
                                std::string(ModelTypeName(family)));
      }
    }
    return Status::Ok();
  }
  const char* experts_key = family == ModelFamily::kMixtral ? "num_local_experts" : "num_experts";
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt(experts_key, &s.num_experts, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("num_experts_per_tok", &s.num_experts_per_tok, true));
  // (More than the experts: ValidateModelConfig says so, for code-built configs too.)
  if (family == ModelFamily::kMixtral) {
    config->norm_topk_prob = true;  // Mixtral always renormalises
    return Status::Ok();
  }
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("moe_intermediate_size", &s.moe_intermediate_size, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("shared_expert_intermediate_size",
                                         &s.shared_expert_intermediate_size, true));
  config->norm_topk_prob = false;
  SERVELAB_RETURN_IF_ERROR(r.Bool("norm_topk_prob", &config->norm_topk_prob));
  int32_t sparse_step = 1;
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("decoder_sparse_step", &sparse_step, false));
  if (sparse_step != 1) {
    return r.Error("decoder_sparse_step", std::to_string(sparse_step) + " is not supported "
                                          "(only 1: every layer a mixture of experts)");
  }
  if (r.Has("mlp_only_layers")) {
    const json& layers = r.At("mlp_only_layers");
    if (!layers.is_array() || !layers.empty()) {
      return r.Error("mlp_only_layers", "only [] is supported (every layer a mixture of "
                                        "experts), got " + Describe(layers));
    }
  }
  return Status::Ok();
}

Status ReadConfig(const json& root, const std::string& source, ModelConfig* config) {
  if (!root.is_object()) return InvalidArgument(source + ": expected a JSON object at the top");
  const KeyReader r(root, source);
  StatusOr<ModelFamily> family = ReadFamily(r);
  if (!family.ok()) return family.status();
  config->family = *family;
  ModelSpec& s = config->spec;
  s.rms_norm_eps = *family == ModelFamily::kMixtral ? 1e-5 : 1e-6;
  s.rope_theta = *family == ModelFamily::kMixtral ? 1e6 : 10000.0;
  s.max_position_embeddings = *family == ModelFamily::kLlama    ? 2048
                              : IsMistralFamily(*family)       ? 131072
                                                                : 32768;
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("hidden_size", &s.hidden_size, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("num_attention_heads", &s.num_attention_heads, true));
  s.num_key_value_heads = s.num_attention_heads;
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("num_key_value_heads", &s.num_key_value_heads, false));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("head_dim", &s.head_dim, false));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("intermediate_size", &s.intermediate_size, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("num_hidden_layers", &s.num_hidden_layers, true));
  SERVELAB_RETURN_IF_ERROR(r.PositiveInt("vocab_size", &s.vocab_size, true));
  SERVELAB_RETURN_IF_ERROR(
      r.PositiveInt("max_position_embeddings", &s.max_position_embeddings, false));
  SERVELAB_RETURN_IF_ERROR(r.PositiveNumber("rms_norm_eps", &s.rms_norm_eps, false));
  SERVELAB_RETURN_IF_ERROR(r.PositiveNumber("rope_theta", &s.rope_theta, false));
  SERVELAB_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &s.tie_word_embeddings));
  s.attention_bias = IsQwenFamily(*family);
  SERVELAB_RETURN_IF_ERROR(r.Bool("attention_bias", &s.attention_bias));
  config->o_proj_bias = *family == ModelFamily::kLlama && s.attention_bias;
  bool mlp_bias = false;
  SERVELAB_RETURN_IF_ERROR(r.Bool("mlp_bias", &mlp_bias));
  if (mlp_bias) return r.Error("mlp_bias", "true is not supported");
  std::string act = "silu";
  SERVELAB_RETURN_IF_ERROR(r.String("hidden_act", &act));
  if (act != "silu") return r.Error("hidden_act", "'" + act + "' is not supported (only silu)");
  SERVELAB_RETURN_IF_ERROR(ReadRopeScaling(r, source, &config->rope_scaling));
  SERVELAB_RETURN_IF_ERROR(ReadSlidingWindow(r, *family, &config->sliding_window));
  SERVELAB_RETURN_IF_ERROR(ReadExperts(r, *family, config));
  SERVELAB_RETURN_IF_ERROR(ReadEosTokenIds(r, &config->eos_token_ids));
  return ReadTorchDType(r, &config->torch_dtype);
}

}  // namespace

std::string_view ModelTypeName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlama: return "llama";
    case ModelFamily::kMistral: return "mistral";
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kMixtral: return "mixtral";
    case ModelFamily::kQwen2Moe: return "qwen2_moe";
  }
  return "?";
}

std::string_view ArchitectureName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlama: return "LlamaForCausalLM";
    case ModelFamily::kMistral: return "MistralForCausalLM";
    case ModelFamily::kQwen2: return "Qwen2ForCausalLM";
    case ModelFamily::kMixtral: return "MixtralForCausalLM";
    case ModelFamily::kQwen2Moe: return "Qwen2MoeForCausalLM";
  }
  return "?";
}

std::vector<std::string> SupportedModelTypes() {
  std::vector<std::string> names;
  for (ModelFamily f : kFamilies) names.emplace_back(ModelTypeName(f));
  return names;
}

std::string_view TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "float32";
    case DType::kFp16: return "float16";
    case DType::kBf16: return "bfloat16";
    default: return "";
  }
}

StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  ModelConfig config;
  SERVELAB_RETURN_IF_ERROR(ReadConfig(root, source, &config));
  SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(config, source));
  return config;
}

StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_file = path.extension() == ".json" && !fs::is_directory(path, ec);
  const fs::path file = is_file ? path : path / "config.json";
  auto text = ReadRegularFile(file.string(), kMaxConfigFileBytes, "model config");
  if (!text.ok()) return text.status();
  StatusOr<ModelConfig> config = ParseModelConfig(*text, file.string());
  if (config.ok()) {
    config->spec.name = fs::absolute(file, ec).lexically_normal().parent_path().filename().string();
  }
  return config;
}

}  // namespace servelab
