#pragma once
// A mixture of experts' routing in a validation (sim/validation.h): the experts each kind
// of step ran, as the engine counted them (Backend::Routing) against the simulator's
// routing model's expectation, and the routing model that fits a run's counts
// (sim/counted_routing.h). Exact whatever the host's speed: counts, not times.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "sim/counted_routing.h"
#include "sim/validation.h"

namespace servelab {

// A mixture of experts' routing over one kind of step of a run: decode-only steps of a
// range of batch sizes (1, 2, 3-4, 5-8, ...: the scheduler's batches grow by ones, the
// router's distinct experts saturate), or the steps with a prefill chunk; the engine's
// counts and the simulator's expectation, each the mean over the steps.
struct RoutingRow {
  std::string steps;  // "decode_1", "decode_2", "decode_3-4", "mixed"
  int64_t count = 0;
  ExpertsRun engine, sim;
};

// The rows of a run whose steps counted their routing (both experts_measured and
// experts_predicted), decode ranges in order, then the mixed steps; empty for a dense
// model or an engine that does not count.
std::vector<RoutingRow> RoutingRows(std::span<const StepComparison> steps);

// The routing model that fits a run's counts, on the engine's and on the simulator's
// expectations: the skew (FitRoutingSkew) its decode-only steps of two or more sequences
// fit, then, at that skew, the locality and favourites (FitRoutingLocality) its lone
// prefill chunks (one sequence, more than one token) fit; with how many steps of each.
// The simulator's recover its own routing; the engine's are the ones to route with to
// route as it did.
struct RoutingFit {
  int64_t decode_steps = 0;
  double skew_engine = 0, skew_sim = 0;  // 0 without decode steps
  int64_t chunk_steps = 0;
  RoutingLocality locality_engine, locality_sim;  // {1, 0} without lone chunks
};

// None for a dense model (v.sim_config.model), or without such steps or routing counts.
std::optional<RoutingFit> FitRouting(const LoadValidation& v);

}  // namespace servelab
