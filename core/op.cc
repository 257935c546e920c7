#include "core/op.h"

#include <array>

#include "core/status.h"

namespace servelab {
namespace {

constexpr std::array<OpInfo, 18> kOps = {{
    {Op::kEmbedding, "embedding", OpForm::kStream, OpScope::kPerStep, true},
    {Op::kInputNorm, "input_norm", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kQkvProj, "qkv_proj", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kRope, "rope", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kKvCacheWrite, "kv_cache_write", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kAttentionDecode, "attention_decode", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kAttentionPrefill, "attention_prefill", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kOProj, "o_proj", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kPostAttentionNorm, "post_attention_norm", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kGateUpProj, "gate_up_proj", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kSiluAndMul, "silu_and_mul", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kDownProj, "down_proj", OpForm::kRoofline, OpScope::kPerLayer, true},
    {Op::kMoeMlp, "moe_mlp", OpForm::kRoofline, OpScope::kPerLayer, false},
    {Op::kResidualAdd, "residual_add", OpForm::kStream, OpScope::kPerLayer, false},
    {Op::kAllReduce, "allreduce", OpForm::kStream, OpScope::kPerLayer, true},
    {Op::kFinalNorm, "final_norm", OpForm::kStream, OpScope::kPerStep, true},
    {Op::kLmHead, "lm_head", OpForm::kRoofline, OpScope::kPerStep, true},
    {Op::kSampling, "sampling", OpForm::kStream, OpScope::kPerStep, true},
}};

}  // namespace

std::span<const OpInfo> AllOps() { return kOps; }

const OpInfo& InfoOf(Op op) {
  for (const OpInfo& info : kOps) {
    if (info.op == op) return info;
  }
  SERVELAB_CHECK(false);
  return kOps[0];
}

std::optional<Op> OpByName(std::string_view name) {
  for (const OpInfo& info : kOps) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}

std::vector<std::string> OpNames() {
  std::vector<std::string> names;
  for (const OpInfo& info : kOps) names.emplace_back(info.name);
  return names;
}

}  // namespace servelab
