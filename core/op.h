#pragma once
// The ops of one decoder step, by name: the vocabulary the engine's profiler times, the
// profiles record and the calibrated cost model predicts (their work formulas:
// sim/op_model.h).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servelab {

enum class Op : uint8_t {
  kEmbedding,
  kInputNorm,
  kQkvProj,
  kRope,
  kKvCacheWrite,
  kAttentionDecode,
  kAttentionPrefill,
  kOProj,
  kPostAttentionNorm,
  kGateUpProj,
  kSiluAndMul,
  kDownProj,
  kMoeMlp,
  kResidualAdd,
  kAllReduce,
  kFinalNorm,
  kLmHead,
  kSampling,
};

enum class OpForm : uint8_t { kRoofline, kStream };
enum class OpScope : uint8_t { kPerLayer, kPerStep };

struct OpInfo {
  Op op;
  std::string_view name;  // as in profiles and MODEL.yaml
  OpForm form;
  OpScope scope;
  // Part of servelab's own step (the runners and the roofline run it); false for ops
  // other engines run separately (Vidur's residual add), counted only when fitted, and
  // for moe_mlp, a mixture-of-experts layer's whole MLP (router, experts, shared expert),
  // which replaces gate_up_proj, silu_and_mul and down_proj in such layers only.
  bool canonical;
};

// Every op, in step order.
std::span<const OpInfo> AllOps();
const OpInfo& InfoOf(Op op);
std::optional<Op> OpByName(std::string_view name);
std::vector<std::string> OpNames();

}  // namespace servelab
