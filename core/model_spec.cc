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

int64_t ModelSpec::ParamsPerLayer() const {
  const int64_t h = hidden_size;
  const int64_t qkv = h * (QDim() + 2 * KvDim()) + (attention_bias ? QDim() + 2 * KvDim() : 0);
  const int64_t o = QDim() * h;
  const int64_t mlp = 3 * h * int64_t{intermediate_size};
  const int64_t norms = 2 * h;
  return qkv + o + mlp + norms;
}

int64_t ModelSpec::NumParams() const {
  const int64_t embed = int64_t{vocab_size} * hidden_size;
  return embed + int64_t{num_hidden_layers} * ParamsPerLayer() + hidden_size +
         (tie_word_embeddings ? 0 : embed);
}

double ModelSpec::KvBytesPerToken(DType kv_dtype) const {
  return static_cast<double>(KvElementsPerToken()) * DTypeBytes(kv_dtype);
}

}  // namespace servelab
