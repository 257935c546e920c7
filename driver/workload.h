#pragma once
// A Workload is a finite stream of requests in non-decreasing arrival order.
// Synthetic workloads generate lazily (a million requests need no memory up front);
// traces are read and validated whole at construction, so a malformed line is an
// error before anything runs.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/request.h"
#include "core/status.h"
#include "driver/workload_config.h"

namespace servelab {

class Workload {
 public:
  virtual ~Workload() = default;
  // Fills the workload fields of `request` (id, client, priority, arrival, prompt_len,
  // target_output_len, prefix hashes) and returns true; false at the end of the stream.
  // Ids are 0, 1, 2, ... in arrival order (with sessions: in order of generation).
  virtual bool Next(Request& request) = 0;
  // Closed-loop workloads (multi-turn sessions): `finished` completed at finished.finish;
  // fills `next` with the request it causes (its arrival >= that time) and returns true,
  // or false when it causes none. Such requests take the next ids, so ids are in order
  // of generation, not of arrival.
  virtual bool FollowUp(const Request& /*finished*/, Request& /*next*/) { return false; }
  virtual bool HasFollowUps() const { return false; }
};

// Every random stream is derived from `seed`, one independent stream per purpose
// (arrivals, input lengths, output lengths, clients), so changing one distribution
// leaves the others' draws unchanged.
StatusOr<std::unique_ptr<Workload>> MakeWorkload(const WorkloadConfig& config, uint64_t seed);

}  // namespace servelab
