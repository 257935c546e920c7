#include "policies/registry.h"

#include "core/params.h"
#include "core/text.h"
#include "policies/fcfs_policy.h"
#include "policies/length_policies.h"
#include "policies/mlfq_policy.h"
#include "policies/priority_policy.h"
#include "policies/vtc_policy.h"

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
  registry.Register("priority",
                    "lowest priority value first, FCFS within a class; optional aging_s, "
                    "preemptive",
                    MakePriorityPolicy);
  registry.Register("sjf", "shortest predicted output first (oracle|noisy|bucket predictor)",
                    MakeSjfPolicy);
  registry.Register("srpt", "shortest predicted remaining output first; preemptive by default",
                    MakeSrptPolicy);
  registry.Register("lof", "longest (true) output first, as SGLang's lof; victim = latest arrival",
                    MakeLofPolicy);
  registry.Register("vtc",
                    "Virtual Token Counter fairness (OSDI'24): least-served client first",
                    MakeVtcPolicy);
  registry.Register("mlfq",
                    "FastServe skip-join MLFQ: prefill-sized entry level, quantum demotion",
                    MakeMlfqPolicy);
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
