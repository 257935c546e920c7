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
//
// A sequence's tokens route independently unless `routing_locality` > 0: then a prefill
// chunk's tokens follow their sequence. Each of its n tokens, with probability
// `routing_locality` (p), routes as one of the sequence's `routing_favourites` (F) shared
// draws, chosen at random, and otherwise as a draw of its own; so the chunk is
// F (1 - (1 - p/F)^n) + (1 - p) n independent draws (LocalDraws): about n while n is
// small, then a sequence's favourites, F draws, plus a steady (1 - p) fresh draws a token.
// It touches fewer experts than n independent tokens and piles its rows into them.
// Mixtral's routing analysis finds consecutive tokens of a text pick the same expert well
// above chance; the CPU engine's random-weight Mixtral runs 5.3 experts (of 8, 2 a token)
// in a chunk of 16 to 64 tokens, then 6.2 at 128 and 7.7 at 512: a working set, then a
// slow rise, which this form follows and a power law of n does not. A step is its draws
// (RoutedTokens).
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/params.h"
#include "core/step_plan.h"
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

// The cost models' parameters for it (`cost_model: {..., expert_imbalance, routing_skew,
// routing_locality, routing_favourites}`).
struct ExpertRoutingOptions {
  // The busiest EP GPU's share of a MoE layer's token x expert rows over the mean share,
  // >= 1; 0 = derived from the routing (ExpertImbalance, RoutingSkew).
  double expert_imbalance = 0;
  // How unevenly tokens pick experts: expert i (of E) is picked in proportion to
  // (i + 1)^-routing_skew, a Zipf law; 0 = uniform routing. In [0, 4].
  double routing_skew = 0;
  // How much a prefill chunk's tokens route together: the chance that a token of a chunk
  // routes as one of its sequence's favourite draws rather than on its own; 0 = every token
  // its own draw, 1 with one favourite = a whole chunk picks as one token does. In [0, 1].
  double routing_locality = 0;
  // A sequence's favourite draws (each a token's per_token experts): the working set its
  // local tokens share. In [1, 1024]; 1 by default.
  double routing_favourites = 1;
};

// The independent draws `tokens` tokens of one sequence make when each routes with
// probability `locality` as one of `favourites` shared draws, at random, else on its own:
// favourites (1 - (1 - locality / favourites)^tokens) + (1 - locality) tokens, the
// expected distinct shared draws used plus the tokens' own. In [1, tokens] for tokens
// >= 1; `tokens` at locality 0. REQUIRES: favourites >= 1, locality in [0, 1].
double LocalDraws(double tokens, double favourites, double locality);
// Of those draws, the ones that carry a single token: the tokens' own, (1 - locality)
// tokens, and the shared draws exactly one token used, tokens x locality x
// (1 - locality / favourites)^(tokens - 1). `tokens` at locality 0 or for one token; 0 for
// a chunk that picks as one token (locality 1 over one favourite).
double LocalSingleDraws(double tokens, double favourites, double locality);

// Reads the four keys (each absent one from `defaults`); an imbalance in (0, 1) is an error
// naming the key.
StatusOr<ExpertRoutingOptions> ReadExpertRoutingOptions(ParamReader& params,
                                                        const ExpertRoutingOptions& defaults = {});

// The rows vLLM's fused MoE kernel pads each expert's to (its BLOCK_SIZE_M) in its default
// configuration: 16 while a step's tokens are at most the experts, else 64 (vLLM's
// get_default_config; its tuned per-GPU tables choose per batch size).
int32_t FusedMoeBlockRows(double tokens, int32_t experts);

// A step's tokens as routing sees them: `tokens` tokens (k rows each) in `draws`
// independent routing draws, `single_draws` of them one token each (decodes, and a
// chunk's LocalSingleDraws; every token without locality). Without locality all three
// are equal.
struct RoutedTokens {
  double tokens = 0;
  double draws = 0;
  double single_draws = 0;
  static RoutedTokens Independent(double tokens) { return {tokens, tokens, tokens}; }
  RoutedTokens& operator+=(const RoutedTokens& o) {
    tokens += o.tokens;
    draws += o.draws;
    single_draws += o.single_draws;
    return *this;
  }
};

class ExpertRouting {
 public:
  ExpertRouting() = default;  // a dense model: no experts
  // REQUIRES: experts >= per_token >= 1, ep >= 1, options.routing_favourites >= 1,
  // options.routing_locality in [0, 1].
  ExpertRouting(int32_t experts, int32_t per_token, int32_t ep, const ExpertRoutingOptions& options);

  int32_t experts() const { return experts_; }
  int32_t per_token() const { return per_token_; }
  int32_t expert_parallel() const { return ep_; }

  // Adds one sequence's `new_tokens` tokens of a step to `step`: a decode (or any token
  // without locality) one draw each, a prefill chunk of n tokens LocalDraws(n) draws,
  // LocalSingleDraws(n) of them one token each.
  void Add(RoutedTokens& step, int32_t new_tokens) const;
  // A step of `seqs` sequences of `each` new tokens: Add `seqs` times, in O(1).
  RoutedTokens Sequences(int64_t seqs, int64_t each) const;

  // The distinct experts a step's draws touch, over all GPUs (expected): per expert
  // 1 - (1 - q)^D with q its pick probability, D the draws.
  double Touched(const RoutedTokens& step) const;
  // The token x expert rows on the busiest GPU: all of them without expert parallelism,
  // else rows / ep x the imbalance of the draws' k D picks.
  double BusiestGpuRows(const RoutedTokens& step) const;
  // Of them, what a grouped GEMM computes when each expert's rows are rounded up to whole
  // tiles of `tile` rows: per expert (X draws, X binomial over the D draws with its pick
  // probability, each draw the mean T / D rows) E[ceil(X T / D / tile)] tiles, summed
  // over the binomial's pmf while an expert's draws stay within 512, beyond that from
  // P(X > 0) and the normal approximation (within 1% of the exact sum there; exact for
  // tile 1). The busiest GPU's are its share of them plus the rows its imbalance adds
  // (each into an expert already touched). The mean is exact while every draw carries as
  // many rows; under locality a chunk's shared draws carry more and its own draws one, and
  // the mean then pads fewer tiles than the mixture would (by a few percent at 8 experts;
  // by up to a fifth at 64 experts of 6 a token, a chunk of 256 and 64-row tiles).
  double BusiestGpuPaddedRows(const RoutedTokens& step, int32_t tile) const;
  // The experts given exactly one row, on the busiest GPU: an engine that runs each expert
  // on its own runs those as matrix-vector products (the CPU runner's GEMV path). Per
  // expert, picked by exactly one of the S one-token draws and by none of the other draws:
  // S q (1 - q)^(D - 1); over the GPU's share of the experts.
  double BusiestGpuSingleRowExperts(const RoutedTokens& step) const;

  // What a MoE layer of `plan` runs (ExpertsRun): the experts its draws touch over all
  // GPUs (Touched), and those given one row on the busiest GPU; each sequence's tokens
  // routed as the cost models route them (Add, a padding seq one token).
  ExpertsRun Expected(const StepPlan& plan) const;

  // The same for `tokens` independent tokens (RoutedTokens::Independent).
  double Touched(double tokens) const { return Touched(RoutedTokens::Independent(tokens)); }
  double BusiestGpuRows(double tokens) const {
    return BusiestGpuRows(RoutedTokens::Independent(tokens));
  }
  double BusiestGpuPaddedRows(double tokens, int32_t tile) const {
    return BusiestGpuPaddedRows(RoutedTokens::Independent(tokens), tile);
  }
  double BusiestGpuSingleRowExperts(double tokens) const {
    return BusiestGpuSingleRowExperts(RoutedTokens::Independent(tokens));
  }

 private:
  double Imbalance(double picks) const;
  // Expected whole tiles of one expert picked with probability q by each of `draws`
  // draws, a tile `tile` draws' rows (fractional when a draw carries several rows).
  static double ExpertTiles(double q, double draws, double tile);

  int32_t experts_ = 0, per_token_ = 0, ep_ = 1;
  double expert_imbalance_ = 0;  // ExpertRoutingOptions::expert_imbalance
  double locality_ = 0;          // ExpertRoutingOptions::routing_locality
  double favourites_ = 1;        // ExpertRoutingOptions::routing_favourites
  // Skewed routing (routing_skew > 0): each expert's pick probability and log(1 - it),
  // and the busiest EP GPU's share from the skew alone.
  std::vector<double> pick_probability_;
  std::vector<double> log_not_picked_;
  double skew_imbalance_ = 1;
};

}  // namespace servelab
