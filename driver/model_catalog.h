#pragma once
// The built-in models: architecture figures from each checkpoint's Hugging Face
// config.json. Custom models come from YAML (model:) with the config.json key names.
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace servelab {

// All catalog models, in a fixed order (Llama 2, Llama 3, Mistral, Qwen2.5).
const std::vector<ModelSpec>& ModelCatalog();
// llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b, llama-3.1-405b,
// mistral-7b, qwen2.5-7b, qwen2.5-14b, qwen2.5-32b, qwen2.5-72b.
std::vector<std::string> ModelNames();
// NotFound "Unable to find model 'x' (did you mean ...?). Valid values are: ..." when
// `name` is not in the catalog. Names match exactly (lower case).
StatusOr<ModelSpec> FindModel(std::string_view name);

}  // namespace servelab
