#include "policies/registry.h"

#include "policies/fcfs_policy.h"
#include "policies/length_policies.h"
#include "policies/mlfq_policy.h"
#include "policies/prefix_policies.h"
#include "policies/priority_policy.h"
#include "policies/vtc_policy.h"

namespace servelab {

void RegisterBuiltinPolicies(PolicyRegistry& registry) {
  registry.Register("fcfs", "first come, first served; preempts the latest admitted",
                    [](ParamReader&, const PolicyContext&) -> StatusOr<std::unique_ptr<Policy>> {
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
  registry.Register("lpm",
                    "longest cached prefix first (SGLang); FCFS past fcfs_threshold waiting",
                    MakeLpmPolicy);
  registry.Register("dfs-weight",
                    "SGLang's depth-first radix-tree weighting: shared prefixes run together",
                    MakeDfsWeightPolicy);
}

const PolicyRegistry& BuiltinPolicies() {
  return BuiltinRegistry<PolicyRegistry>("policy", RegisterBuiltinPolicies);
}

}  // namespace servelab
