#include "policies/fcfs_policy.h"

#include <gtest/gtest.h>

#include "policies/registry.h"

namespace servelab {
namespace {

TEST(FcfsPolicyTest, AdmitsInArrivalOrderAndPreemptedGoFirst) {
  FcfsPolicy policy;
  Request a, b, c;
  a.id = 0;
  b.id = 1;
  c.id = 2;
  policy.Enqueue(a, 0);
  policy.Enqueue(b, 1);
  ASSERT_EQ(policy.Peek(2), &a);
  ASSERT_EQ(policy.Peek(2), &a) << "Peek must not consume";
  policy.Admitted(a, 2);
  EXPECT_EQ(policy.Peek(2), &b);
  c.state = RequestState::kPreempted;
  policy.Enqueue(c, 3);
  EXPECT_EQ(policy.Peek(3), &c);
  EXPECT_EQ(policy.NumWaiting(), 2u);
}

TEST(FcfsPolicyTest, VictimIsTheLatestAdmitted) {
  FcfsPolicy policy;
  Request a, b, c;
  std::vector<Request*> running = {&a, &b, &c};
  EXPECT_EQ(policy.PickVictim(running, 0), &c);
}

TEST(PolicyRegistryTest, UnknownNameListsValidOnes) {
  NamedParams config{"fcfss", {}, "scheduler.policy", "exp.yaml:7", ""};
  auto policy = BuiltinPolicies().Make(config, PolicyContext{});
  ASSERT_FALSE(policy.ok());
  const std::string& message = policy.status().message();
  EXPECT_EQ(message.rfind("exp.yaml:7: scheduler.policy: Unable to find policy 'fcfss' (did you "
                          "mean 'fcfs'?). Valid values are: ",
                          0),
            0u)
      << message;
  for (const auto& name : BuiltinPolicies().Names()) {
    EXPECT_NE(message.find(name), std::string::npos) << name;
  }
}

TEST(PolicyRegistryTest, FcfsRejectsParameters) {
  NamedParams config{"fcfs", {{"aging_s", "3", "exp.yaml:9"}}, "scheduler.policy", "exp.yaml:8", ""};
  auto policy = BuiltinPolicies().Make(config, PolicyContext{});
  ASSERT_FALSE(policy.ok());
  EXPECT_NE(policy.status().message().find("exp.yaml:9: scheduler.policy: unknown parameter 'aging_s'"),
            std::string::npos)
      << policy.status().message();
}

}  // namespace
}  // namespace servelab
