#pragma once
// The policy registry: name -> factory. Registration is explicit
// (RegisterBuiltinPolicies), never static-init, so the linker keeps every policy.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"

namespace servelab {

// Builds a policy from its parameters; reports unknown or invalid parameters.
using PolicyFactory = std::function<StatusOr<std::unique_ptr<Policy>>(const NamedParams&)>;

class PolicyRegistry {
 public:
  void Register(std::string name, std::string summary, PolicyFactory factory);
  // "Unable to find policy 'x'. Valid values are: ..." for an unknown name.
  StatusOr<std::unique_ptr<Policy>> Make(const NamedParams& config) const;
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
