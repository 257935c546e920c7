// `servelab make-model`: a Hugging Face model folder (config.json + safetensors) with
// seeded random weights, of any Llama / Mistral / Qwen2 / Mixtral / Qwen2-MoE shape or a
// catalog model scaled down.
#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "core/text.h"
#include "driver/model_catalog.h"
#include "driver/output_dir.h"
#include "engine/random_model.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

// A regular file where the folder goes is bad input, said before anything is written;
// then the model is staged beside `out` and renamed in (WriteRandomModelInto).
StatusOr<WrittenModel> WriteModelInto(const RandomModelOptions& make, const std::string& out) {
  if (Status places = CheckOutputPlaces(out, {"config.json", "model.safetensors", "model.safetensors.index.json"});
      !places.ok()) {
    return places;
  }
  return WriteRandomModelInto(make, out);
}

std::optional<ModelFamily> ParseFamily(const std::string& name) {
  for (ModelFamily f : {ModelFamily::kLlama, ModelFamily::kMistral, ModelFamily::kQwen2,
                        ModelFamily::kMixtral, ModelFamily::kQwen2Moe}) {
    if (name == ModelTypeName(f)) return f;
  }
  return std::nullopt;
}

// The family of a catalog model, from its name ("llama-3-8b", "mistral-7b", "qwen2.5-7b").
std::optional<ModelFamily> CatalogFamily(const std::string& name) {
  if (name.starts_with("mixtral")) return ModelFamily::kMixtral;
  if (name.starts_with("llama")) return ModelFamily::kLlama;
  if (name.starts_with("mistral")) return ModelFamily::kMistral;
  if (name.starts_with("qwen2")) return ModelFamily::kQwen2;
  return std::nullopt;
}

std::optional<DType> ParseWeightDType(const std::string& name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::kFp32;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::kFp16;
  if (name == "bf16" || name == "bfloat16") return DType::kBf16;
  return std::nullopt;
}

}  // namespace

int MakeModelCommand(const std::vector<std::string>& args) {
  po::options_description options(
      "servelab make-model --arch llama|mistral|qwen2|mixtral|qwen2_moe --layers N --hidden H --heads A "
      "--intermediate I --vocab V --out DIR [options]\n"
      "  or: servelab make-model --from CATALOG_MODEL [--layers N --hidden H ...] --out DIR\n"
      "Writes DIR/config.json and seeded random weights in safetensors");
  std::string arch, from, dtype_name = "bf16", out;
  int32_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0, vocab = 0;
  int32_t head_dim = 0, max_position = 0, shards = 1;
  int32_t experts = 0, experts_per_tok = 0, moe_intermediate = 0, shared_intermediate = 0;
  double rope_theta = 0;
  uint64_t seed = 0;
  std::string seed_text;  // parsed here: program_options reads "-1" as 2^64-1
  options.add_options()
      ("help,h", "show this help")
      ("arch", po::value<std::string>(&arch),
       "llama | mistral | qwen2 (q/k/v biases) | mixtral (experts) | qwen2_moe (experts, a "
       "shared expert, q/k/v biases)")
      ("from", po::value<std::string>(&from),
       "start from a catalog model (servelab list models); given flags override it, and a "
       "new --hidden keeps its heads and scales its intermediate size")
      ("layers", po::value<int32_t>(&layers), "num_hidden_layers")
      ("hidden", po::value<int32_t>(&hidden), "hidden_size")
      ("heads", po::value<int32_t>(&heads), "num_attention_heads")
      ("kv-heads", po::value<int32_t>(&kv_heads), "num_key_value_heads (default: --heads)")
      ("intermediate", po::value<int32_t>(&intermediate), "intermediate_size (SwiGLU width)")
      ("vocab", po::value<int32_t>(&vocab), "vocab_size")
      ("experts", po::value<int32_t>(&experts),
       "mixtral, qwen2_moe: routed experts (num_local_experts / num_experts)")
      ("experts-per-tok", po::value<int32_t>(&experts_per_tok),
       "mixtral, qwen2_moe: experts per token (num_experts_per_tok)")
      ("moe-intermediate", po::value<int32_t>(&moe_intermediate),
       "qwen2_moe: each expert's width (moe_intermediate_size; mixtral's is --intermediate)")
      ("shared-expert-intermediate", po::value<int32_t>(&shared_intermediate),
       "qwen2_moe: the shared expert's width (shared_expert_intermediate_size)")
      ("norm-topk-prob", "qwen2_moe: renormalise the chosen experts' weights (mixtral always does)")
      ("head-dim", po::value<int32_t>(&head_dim), "head_dim (default: hidden / heads)")
      ("max-position", po::value<int32_t>(&max_position), "max_position_embeddings (default 4096)")
      ("rope-theta", po::value<double>(&rope_theta), "rope_theta (default 10000)")
      ("tie-embeddings", "tie_word_embeddings: no lm_head.weight")
      ("dtype", po::value<std::string>(&dtype_name)->default_value("bf16"), "f32 | f16 | bf16")
      ("seed", po::value<std::string>(&seed_text)->default_value("0"),
       "random seed of the weights (0 to 2^64-1)")
      ("shards", po::value<int32_t>(&shards)->default_value(1),
       "weight files, 1 to the model's tensor count; > 1 also writes model.safetensors.index.json")
      ("out", po::value<std::string>(&out), "output folder (created if absent)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab make-model: " << Printable(e.what()) << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options;
    return kExitOk;
  }
  auto fail = [](const std::string& message) {
    std::cerr << "servelab make-model: " << Printable(message) << "\n";
    return kExitBadInput;
  };
  if (out.empty()) return fail("--out is required");

  ModelConfig config;
  ModelSpec& spec = config.spec;
  std::optional<ModelFamily> family;
  int32_t base_heads = 1, base_kv_heads = 1;  // --from's attention heads and KV heads
  if (!arch.empty()) {
    family = ParseFamily(arch);
    if (!family) {
      return fail("--arch: '" + arch + "' is not one of llama, mistral, qwen2, mixtral, qwen2_moe");
    }
  }
  if (!from.empty()) {
    StatusOr<ModelSpec> base = FindModel(from);
    if (!base.ok()) return fail("--from: " + base.status().message());
    const std::optional<ModelFamily> base_family = CatalogFamily(from);
    if (!base_family) return fail("--from: no architecture is known for '" + from + "'");
    if (family && *family != *base_family) {
      return fail("--arch " + arch + " conflicts with --from " + from + " (a " +
                  std::string(ModelTypeName(*base_family)) + " model)");
    }
    family = base_family;
    spec = *base;
    base_heads = base->num_attention_heads;
    base_kv_heads = base->num_key_value_heads;
    if (vm.count("hidden") && hidden != base->hidden_size) {
      spec.head_dim = 0;  // heads kept: head_dim follows hidden / heads
      spec.intermediate_size = std::max<int32_t>(
          1, static_cast<int32_t>(int64_t{base->intermediate_size} * hidden / base->hidden_size));
    }
  } else {
    if (!family) return fail("--arch (or --from) is required");
    for (const char* flag : {"layers", "hidden", "heads", "intermediate", "vocab"}) {
      if (!vm.count(flag)) return fail(std::string("--") + flag + " is required without --from");
    }
    spec.max_position_embeddings = 4096;
    spec.rope_theta = 10000.0;
    spec.rms_norm_eps = IsQwenFamily(*family) ? 1e-6 : 1e-5;
    spec.attention_bias = IsQwenFamily(*family);
    if (IsMoeFamily(*family)) {
      for (const char* flag : {"experts", "experts-per-tok"}) {
        if (!vm.count(flag)) return fail(std::string("--") + flag + " is required for --arch " + arch);
      }
    }
    if (*family == ModelFamily::kQwen2Moe) {
      for (const char* flag : {"moe-intermediate", "shared-expert-intermediate"}) {
        if (!vm.count(flag)) return fail(std::string("--") + flag + " is required for --arch " + arch);
      }
    }
  }
  const bool moe = IsMoeFamily(*family);
  for (const char* flag : {"experts", "experts-per-tok", "moe-intermediate",
                           "shared-expert-intermediate", "norm-topk-prob"}) {
    const bool qwen_only = std::string_view(flag) != "experts" &&
                           std::string_view(flag) != "experts-per-tok";
    if (vm.count(flag) && (!moe || (qwen_only && *family != ModelFamily::kQwen2Moe))) {
      return fail(std::string("--") + flag + " does not apply to a " +
                  std::string(ModelTypeName(*family)) + " model");
    }
  }
  spec.name = std::filesystem::path(out).filename().string();
  const std::pair<const char*, int32_t*> sizes[] = {
      {"layers", &spec.num_hidden_layers}, {"hidden", &spec.hidden_size},
      {"heads", &spec.num_attention_heads}, {"kv-heads", &spec.num_key_value_heads},
      {"intermediate", &spec.intermediate_size}, {"vocab", &spec.vocab_size},
      {"head-dim", &spec.head_dim}, {"max-position", &spec.max_position_embeddings},
      {"experts", &spec.num_experts}, {"experts-per-tok", &spec.num_experts_per_tok},
      {"moe-intermediate", &spec.moe_intermediate_size},
      {"shared-expert-intermediate", &spec.shared_expert_intermediate_size}};
  for (const auto& [flag, field] : sizes) {
    if (!vm.count(flag)) continue;
    const int32_t value = vm[flag].as<int32_t>();
    if (value < 1) return fail(std::string("--") + flag + " must be a positive integer");
    *field = value;
  }
  if (!vm.count("kv-heads") && vm.count("heads")) {
    // Without --from: multi-head attention. With it: the catalog model's query heads per
    // KV head (its GQA group size), as far as the new head count allows.
    spec.num_key_value_heads =
        from.empty() ? spec.num_attention_heads
                     : std::max<int32_t>(1, static_cast<int32_t>(
                                                int64_t{spec.num_attention_heads} *
                                                base_kv_heads / base_heads));
  }
  if (vm.count("rope-theta")) {
    if (!(rope_theta > 0)) return fail("--rope-theta must be positive");
    spec.rope_theta = rope_theta;
  }
  if (vm.count("tie-embeddings")) spec.tie_word_embeddings = true;
  if (spec.head_dim == 0 && spec.hidden_size % spec.num_attention_heads != 0) {
    return fail("--hidden " + std::to_string(spec.hidden_size) + " is not divisible by --heads " +
                std::to_string(spec.num_attention_heads) + " (or give --head-dim)");
  }
  if (spec.num_attention_heads % spec.num_key_value_heads != 0) {
    return fail("--kv-heads " + std::to_string(spec.num_key_value_heads) +
                " must divide --heads " + std::to_string(spec.num_attention_heads));
  }
  const std::optional<DType> dtype = ParseWeightDType(dtype_name);
  if (!dtype) return fail("--dtype: '" + dtype_name + "' is not one of f32, f16, bf16");
  {
    const char* end = seed_text.data() + seed_text.size();
    const auto [ptr, ec] = std::from_chars(seed_text.data(), end, seed);
    if (seed_text.empty() || ec != std::errc() || ptr != end) {
      return fail("--seed: '" + seed_text + "' is not a whole number in [0, 2^64-1]");
    }
  }
  if (moe && spec.num_experts_per_tok > spec.num_experts) {
    return fail("--experts-per-tok " + std::to_string(spec.num_experts_per_tok) +
                " exceeds --experts " + std::to_string(spec.num_experts));
  }
  config.family = *family;
  config.norm_topk_prob = *family != ModelFamily::kQwen2Moe || vm.count("norm-topk-prob") > 0;
  config.o_proj_bias = false;
  config.torch_dtype = *dtype;
  config.eos_token_ids = {std::min(2, spec.vocab_size - 1)};

  RandomModelOptions make;
  make.config = config;
  make.seed = seed;
  make.shards = shards;
  StatusOr<WrittenModel> written = WriteModelInto(make, out);
  if (!written.ok()) {
    std::cerr << "servelab make-model: " << Printable(written.status().message()) << "\n";
    return written.status().IsBadInput() ? kExitBadInput : kExitRuntimeError;
  }
  const std::string experts_text =
      moe ? ", " + std::to_string(spec.num_experts_per_tok) + " of " +
                std::to_string(spec.num_experts) + " experts"
          : "";
  std::printf("wrote %s: %s, %d layers, hidden %d, %d/%d heads%s, %.2fM params, %lld tensors, "
              "%.1f MB of %s weights in %zu file(s)\n",
              out.c_str(), std::string(ModelTypeName(config.family)).c_str(),
              spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads,
              spec.num_key_value_heads, experts_text.c_str(),
              static_cast<double>(written->num_params) * 1e-6,
              static_cast<long long>(written->num_tensors),
              static_cast<double>(written->weight_bytes) * 1e-6, dtype_name.c_str(),
              written->files.size() - 1);
  return kExitOk;
}

}  // namespace servelab
