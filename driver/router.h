#pragma once
// A Router picks the replica an arriving request goes to.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/registry.h"
#include "core/request.h"
#include "core/status.h"

namespace servelab {

// What a router may look at for each replica when it decides.
struct ReplicaLoad {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int64_t tokens_pending = 0;  // prompt + output tokens admitted or queued, not yet done
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view Name() const = 0;
  // REQUIRES: !replicas.empty(). Returns an index into `replicas`.
  virtual int32_t Route(const Request& request, std::span<const ReplicaLoad> replicas) = 0;
};

// The router registry (core/registry.h):
//   round_robin   replica 0, 1, ..., n-1, 0, ...
//   least_loaded  fewest pending tokens (ties: lowest index), as a join-shortest-queue.
//   cache_aware   SGLang's cache-aware router (driver/cache_aware_router.h).
using RouterRegistry = Registry<Router>;
void RegisterBuiltinRouters(RouterRegistry& registry);
const RouterRegistry& BuiltinRouters();

}  // namespace servelab
