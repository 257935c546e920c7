#include "core/model_spec.h"

namespace servelab {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kFp32, DType::kFp16, DType::kBf16, DType::kFp8, DType::kInt8,
                  DType::kInt4}) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

double DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return 4.0;
    case DType::kFp16:
    case DType::kBf16: return 2.0;
    case DType::kFp8:
    case DType::kInt8: return 1.0;
    case DType::kInt4: return 0.5;
  }
  return 0.0;
}

int64_t ModelSpec::AttentionParamsPerLayer() const {
  const int64_t h = hidden_size;
  if (IsMla()) {
    const int64_t heads = num_attention_heads;
    const int64_t q = q_lora_rank > 0 ? h * q_lora_rank + q_lora_rank + int64_t{q_lora_rank} * QDim()
                                      : h * QDim();
    const int64_t kv_down = h * KvLatentDim() + kv_lora_rank;
    const int64_t kv_up = int64_t{kv_lora_rank} * heads * (int64_t{qk_nope_head_dim} + v_head_dim);
    return q + kv_down + kv_up + OutDim() * h + 2 * h;
  }
  const int64_t qkv = h * (QDim() + 2 * KvDim()) + (attention_bias ? QDim() + 2 * KvDim() : 0);
  const int64_t o = QDim() * h;
  const int64_t norms = 2 * h;
  return qkv + o + norms;
}

int64_t ModelSpec::DenseMlpParams() const { return 3 * int64_t{hidden_size} * intermediate_size; }

int64_t ModelSpec::MoeMlpParams(bool active) const {
  const int64_t h = hidden_size;
  const int64_t experts = active ? num_experts_per_tok : num_experts;
  return h * num_experts + experts * 3 * h * ExpertWidth() +
         3 * h * int64_t{shared_expert_intermediate_size};
}

int64_t ModelSpec::ParamsPerLayer() const { return AttentionParamsPerLayer() + DenseMlpParams(); }

namespace {

int64_t Params(const ModelSpec& m, bool active) {
  const int64_t embed = int64_t{m.vocab_size} * m.hidden_size;
  const int64_t layers = int64_t{m.num_hidden_layers} * m.AttentionParamsPerLayer() +
                         int64_t{m.NumDenseLayers()} * m.DenseMlpParams() +
                         int64_t{m.NumMoeLayers()} * (m.IsMoe() ? m.MoeMlpParams(active) : 0);
  return embed + layers + m.hidden_size + (m.tie_word_embeddings ? 0 : embed);
}

}  // namespace

int64_t ModelSpec::NumParams() const { return Params(*this, /*active=*/false); }
int64_t ModelSpec::NumActiveParams() const { return Params(*this, /*active=*/true); }

double ModelSpec::KvBytesPerToken(DType kv_dtype) const {
  return static_cast<double>(KvElementsPerToken()) * DTypeBytes(kv_dtype);
}

}  // namespace servelab
