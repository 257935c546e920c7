#include "policies/registry.h"

#include "core/params.h"
#include "core/text.h"
#include "policies/fcfs_policy.h"

namespace servelab {

void PolicyRegistry::Register(std::string name, std::string summary, PolicyFactory factory) {
  entries_[std::move(name)] = Entry{std::move(summary), std::move(factory)};
}

StatusOr<std::unique_ptr<Policy>> PolicyRegistry::Make(const NamedParams& config,
                                                       const PolicyContext& context) const {
  auto it = entries_.find(config.name);
  if (it == entries_.end()) {
    std::string where = config.where.empty() ? "" : config.where + ": ";
    return InvalidArgument(where + config.path + ": " +
                           UnknownNameMessage("policy", config.name, Names()));
  }
  return it->second.factory(config, context);
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const std::string& PolicyRegistry::Summary(const std::string& name) const {
  return entries_.at(name).summary;
}

void RegisterBuiltinPolicies(PolicyRegistry& registry) {
  registry.Register("fcfs", "first come, first served; preempts the latest admitted",
                    [](const NamedParams& config,
                       const PolicyContext&) -> StatusOr<std::unique_ptr<Policy>> {
                      ParamReader params(config);
                      SERVELAB_RETURN_IF_ERROR(params.Finish());
                      return std::unique_ptr<Policy>(std::make_unique<FcfsPolicy>());
                    });
}

const PolicyRegistry& BuiltinPolicies() {
  static const PolicyRegistry* registry = [] {
    auto* r = new PolicyRegistry();
    RegisterBuiltinPolicies(*r);
    return r;
  }();
  return *registry;
}

}  // namespace servelab
