#pragma once
// The routing a MoE profile counted (experts_run on its moe_mlp rows: the engine's own
// router at work) as the simulator's routing model (ExpertRoutingOptions): the expert
// popularity skew its decode batches show, and the locality and favourites its prefill
// chunks show.
// `calibrate` writes it into MODEL.yaml; a calibrated cost model routes a model of the
// same MoE shape with it (sim/calibrated_cost_model.h).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/model_spec.h"
#include "driver/profile_table.h"
#include "sim/expert_routing.h"

namespace servelab {

struct CountedRouting {
  // The MoE shape it was counted on (a router belongs to one model).
  int32_t num_experts = 0;
  int32_t experts_per_token = 0;
  int32_t hidden_size = 0;
  int32_t expert_intermediate_size = 0;
  // Rows counted: prefill chunks (one sequence, more than one token) and decode batches
  // (more than one sequence, one token each); a one-token row runs its k experts either way.
  int64_t chunk_rows = 0;
  int64_t decode_rows = 0;
  // The experts run over uniform routing's expectation at the same tokens (ExpertRouting::
  // Touched), the mean over the rows: how far from uniform the router is.
  double chunk_ratio = 0;
  double decode_ratio = 0;
  // The routing_skew (a Zipf exponent, [0, 4] to 0.01) whose expected experts touched is
  // closest to the decode rows' counts in least squares; 0 without decode rows; or, when
  // skew_given, the skew given (a serving run's: `servelab validate` fits it on the
  // engine's decode batches, which need not route as a profile's decode rows do).
  double routing_skew = 0;
  bool skew_given = false;
  // Then, at that skew, the routing_favourites and routing_locality closest to the chunk
  // rows' counts (FitRoutingLocality); 1 and 0 without chunk rows.
  double routing_favourites = 1;
  double routing_locality = 0;
  // Over every counted row, the mean |expected - counted| / counted experts, in percent:
  // this routing's expectation, and uniform routing over independent tokens'.
  double touched_mape_pct = 0;
  double uniform_touched_mape_pct = 0;

  bool Matches(const ModelSpec& model) const;
  bool SameShapeAs(const CountedRouting& other) const;
  ExpertRoutingOptions Options() const;
};

// A step's routing as counted: `seqs` sequences of `each` new tokens, and the experts a
// MoE layer ran (the mean over its layers).
struct RoutingCount {
  int64_t seqs = 0;
  int64_t each = 0;
  double experts_run = 0;
};

// The routing_skew ([0, 4] to 0.01) whose expected experts touched (ExpertRouting::
// Touched, independent draws) is closest to the decode batches' counts in least squares,
// for `experts` experts of which a token picks `per_token`; 0 without counts.
double FitRoutingSkew(int32_t experts, int32_t per_token, std::span<const RoutingCount> decodes);

// A chunk's locality (ExpertRoutingOptions): its sequence's favourite draws and the
// chance a token routes as one of them.
struct RoutingLocality {
  double favourites = 1;
  double locality = 0;
};

// The routing_favourites ([1, 64] to 0.1) and routing_locality ([0, 1] to 0.001) whose
// expected experts touched, at routing skew `skew`, are closest to the prefill chunks'
// counts in least squares: whole favourites, then tenths within one of the best, each at
// its best locality (to 0.01, then to 0.001 around it); of equals, the fewest favourites.
// Chunks of a few tokens cannot tell a few favourites from many (two tokens make
// 2 - locality^2 / favourites draws): any pair that fits them does; and at a low
// locality the favourites move a chunk's experts little, so a little noise in the counts
// moves them a lot. {1, 0} without counts.
RoutingLocality FitRoutingLocality(int32_t experts, int32_t per_token, double skew,
                                   std::span<const RoutingCount> chunks);

// One entry per MoE shape whose moe_mlp rows counted their routing (experts_run > 0), in
// the order the shapes first appear; with `skew`, every shape's routing_skew is that one
// (skew_given) and its locality and favourites are fitted at it.
std::vector<CountedRouting> CountedRoutingOf(const std::vector<ProfileTable>& tables,
                                             std::optional<double> skew = std::nullopt);

}  // namespace servelab
