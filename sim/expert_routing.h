#pragma once
// How a mixture-of-experts layer's tokens land on its experts, as the cost models count
// it (the roofline and the calibrated one share it): the experts a step's tokens touch
// (their weights are read), the token x expert rows the busiest GPU computes under expert
// parallelism, and the rows a grouped GEMM computes once each expert's rows are rounded
// up to whole row tiles (vLLM's fused MoE kernel pads every expert's rows to its
// BLOCK_SIZE_M, moe_align_block_size; a cuBLAS-like tile does the same per expert).
//
// Routing is uniform over the experts unless `routing_skew` > 0, a Zipf law over them
// (SkewedRouting); with expert parallelism over `ep` GPUs, expert i lives on GPU i mod ep
// and the busiest GPU carries `expert_imbalance` x the mean rows, or, when 0, the larger
// of the skew's share and a uniform random draw's (ExpertImbalance).
#include <cstdint>
#include <vector>

#include "core/params.h"
#include "core/status.h"

namespace servelab {

// The expected number of distinct experts `tokens` tokens touch when each picks
// `per_token` of `experts` uniformly: E (1 - (1 - k/E)^T). A MoE layer reads the weights
// of those experts only (Mixtral-8x7B at batch 1: 2 of 8; at 64 tokens: all 8).
double ExpectedExpertsTouched(int32_t experts, int32_t per_token, double tokens);

// Expert popularity under a Zipf routing skew `s` over `experts`: each expert's
// probability to be one of a token's `per_token` picks, per_token x p_i with
// p_i = (i + 1)^-s / sum_j (j + 1)^-s, capped at 1 with the excess spread over the others
// in proportion (they sum to per_token); and, with experts placed round-robin on `ep` GPUs
// (expert i on GPU i mod ep), the busiest GPU's share of the picks over the mean share.
struct RoutingSkew {
  std::vector<double> pick_probability;
  double busiest_gpu_share = 1;  // >= 1
};
RoutingSkew SkewedRouting(int32_t experts, int32_t per_token, double s, int32_t ep);

// Under expert parallelism over `ep` GPUs, the busiest GPU's rows over the mean when
// `rows` token x expert rows land uniformly at random: the normal approximation of the
// largest of `ep` binomial loads, 1 + sqrt(2 ln(ep) (1 - 1/ep) ep / rows), and at least
// a whole row (ceil(rows / ep) over the mean), at most ep. 1 for ep = 1.
double ExpertImbalance(int32_t ep, double rows);

// The cost models' parameters for it (`cost_model: {..., expert_imbalance, routing_skew}`).
struct ExpertRoutingOptions {
  // The busiest EP GPU's share of a MoE layer's token x expert rows over the mean share,
  // >= 1; 0 = derived from the routing (ExpertImbalance, RoutingSkew).
  double expert_imbalance = 0;
  // How unevenly tokens pick experts: expert i (of E) is picked in proportion to
  // (i + 1)^-routing_skew, a Zipf law; 0 = uniform routing. In [0, 4].
  double routing_skew = 0;
};
// Reads both keys (defaults as above); an imbalance in (0, 1) is an error naming the key.
StatusOr<ExpertRoutingOptions> ReadExpertRoutingOptions(ParamReader& params);

// The rows vLLM's fused MoE kernel pads each expert's to (its BLOCK_SIZE_M) in its default
// configuration: 16 while a step's tokens are at most the experts, else 64 (vLLM's
// get_default_config; its tuned per-GPU tables choose per batch size).
int32_t FusedMoeBlockRows(double tokens, int32_t experts);

class ExpertRouting {
 public:
  ExpertRouting() = default;  // a dense model: no experts
  // REQUIRES: experts >= per_token >= 1, ep >= 1.
  ExpertRouting(int32_t experts, int32_t per_token, int32_t ep, const ExpertRoutingOptions& options);

  int32_t experts() const { return experts_; }
  int32_t per_token() const { return per_token_; }
  int32_t expert_parallel() const { return ep_; }

  // The distinct experts `tokens` tokens touch, over all GPUs (expected).
  double Touched(double tokens) const;
  // The token x expert rows of `tokens` tokens on the busiest GPU: all of them without
  // expert parallelism, else rows / ep x the imbalance.
  double BusiestGpuRows(double tokens) const;
  // Of them, what a grouped GEMM computes when each expert's rows are rounded up to whole
  // tiles of `tile` rows: per expert (X rows, X binomial over the T tokens with its pick
  // probability) E[ceil(X / tile)] tiles, summed over the binomial's pmf while an expert's
  // rows stay within 512, beyond that from P(X > 0) and the normal approximation (within
  // 1% of the exact sum there; exact for tile 1). The busiest GPU's are its share of them
  // plus the rows its imbalance adds (each into an expert already touched).
  double BusiestGpuPaddedRows(double tokens, int32_t tile) const;
  // The experts given exactly one row, on the busiest GPU: an engine that runs each expert
  // on its own runs those as matrix-vector products (the CPU runner's GEMV path). Per
  // expert P(X = 1) = T q (1 - q)^(T - 1); over the GPU's share of the experts.
  double BusiestGpuSingleRowExperts(double tokens) const;

 private:
  double Imbalance(double rows) const;
  // Expected whole tiles of one expert picked with probability q by each of `tokens`.
  static double ExpertTiles(double q, double tokens, double tile);

  int32_t experts_ = 0, per_token_ = 0, ep_ = 1;
  double expert_imbalance_ = 0;  // ExpertRoutingOptions::expert_imbalance
  // Skewed routing (routing_skew > 0): each expert's pick probability and log(1 - it),
  // and the busiest EP GPU's share from the skew alone.
  std::vector<double> pick_probability_;
  std::vector<double> log_not_picked_;
  double skew_imbalance_ = 1;
};

}  // namespace servelab
