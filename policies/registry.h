#pragma once
// The policy registry: name -> factory. Registration is explicit
// (RegisterBuiltinPolicies), never static-init, so the linker keeps every policy.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"

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
  // Predicted seconds to prefill a prompt of n tokens alone (from the cost model), for
  // policies that size quanta by it (MLFQ's skip-join). May be empty: then a policy
  // falls back to its own documented estimate.
  std::function<double(int32_t)> prefill_time_s;
};

// Builds a policy from its parameters; reports unknown or invalid parameters.
using PolicyFactory = std::function<StatusOr<std::unique_ptr<Policy>>(const NamedParams&,
                                                                      const PolicyContext&)>;

class PolicyRegistry {
 public:
  void Register(std::string name, std::string summary, PolicyFactory factory);
  // "Unable to find policy 'x'. Valid values are: ..." for an unknown name.
  StatusOr<std::unique_ptr<Policy>> Make(const NamedParams& config,
                                         const PolicyContext& context = {}) const;
  std::vector<std::string> Names() const;
  const std::string& Summary(const std::string& name) const;

 private:
  struct Entry {
    std::string summary;
    PolicyFactory factory;
  };
  std::map<std::string, Entry> entries_;
};

void RegisterBuiltinPolicies(PolicyRegistry& registry);
// The registry with every built-in policy.
const PolicyRegistry& BuiltinPolicies();

}  // namespace servelab
