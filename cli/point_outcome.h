#pragma once
// What one point of a sweep (or compare) gave, as JSON documents: replicate 0's summary
// as its summary.json holds it (RunSummary::ToJson), and, with replicates, every
// replicate's. JSON because a point's outcome may come from another process (an MPI
// rank) or from the folder of an earlier, interrupted sweep, not only from this run.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "driver/metrics.h"

namespace servelab {

struct PointOutcome {
  Status status = Internal("not run");
  nlohmann::ordered_json summary;                  // null unless status is ok
  std::vector<nlohmann::ordered_json> replicates;  // empty for one replicate; else all N,
                                                   // replicate 0's first
  bool ok() const { return status.ok(); }

  // {"ok": true, "summary": ..., "replicates": [...]} or {"ok": false, "code": ...,
  // "message": ...}: the form ranks send and resumed sweeps read.
  nlohmann::ordered_json ToJson() const;
  static PointOutcome FromJson(const nlohmann::ordered_json& json);
};

// A point that ran here: `runs` holds replicate 0's run, then the other replicates'.
PointOutcome OutcomeOf(const std::vector<StatusOr<RunSummary>>& runs);

}  // namespace servelab
