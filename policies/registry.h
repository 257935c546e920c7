#pragma once
// The policy registry: name -> factory (core/registry.h). Registration is explicit
// (RegisterBuiltinPolicies), never static-init, so the linker keeps every policy.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/policy.h"
#include "core/registry.h"

namespace servelab {

// What a policy may know about the experiment besides its own parameters.
struct PolicyClient {
  std::string name;
  int32_t priority = 0;  // lower = more urgent
  double weight = 1.0;   // fairness weight (VTC)
};
struct PolicyContext {
  uint64_t seed = 0;  // for policies that draw (e.g. noisy length predictors); derive a
                      // private stream from it, never share the workload's
  std::vector<PolicyClient> clients;  // indexed by Request::client
  int32_t replica = 0;
  // Predicted seconds to prefill a prompt of n tokens alone (from the backend: the
  // simulator's cost model), for policies that size quanta by it (MLFQ's skip-join). May
  // be empty: then a policy falls back to its own documented estimate.
  std::function<double(int32_t)> prefill_time_s;
  // The replica's KV manager (it outlives the policy), for prefix-aware policies: what a
  // waiting request would take from the prefix cache, and the radix tree. Null in tests
  // that build policies alone.
  const KvCacheManager* kv = nullptr;
};

// Factories read their parameters from the ParamReader; the registry reports unknown or
// invalid ones ("Unable to find policy 'x'. Valid values are: ..." for an unknown name).
using PolicyRegistry = Registry<Policy, PolicyContext>;
using PolicyFactory = PolicyRegistry::Factory;

void RegisterBuiltinPolicies(PolicyRegistry& registry);
// The registry with every built-in policy.
const PolicyRegistry& BuiltinPolicies();

}  // namespace servelab
