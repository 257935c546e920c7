#pragma once
// Prefix-aware ordering (SGLang's cache-aware policies), over the replica's prefix cache
// (PolicyContext::kv; scheduler.prefix_cache must be on):
//
//   lpm         longest prefix match first: each scheduling round ranks the waiting
//               requests by the tokens the cache holds for them, most first, ties in
//               arrival order (a preempted request at the front). With more than
//               `fcfs_threshold` (128) waiting, matching them all costs more than it
//               gains, and the order is FCFS.
//   dfs-weight  SGLang's depth-first weighting over the radix tree (type: radix): each
//               waiting request sits at the node where its match ends; a node's weight
//               is the number of waiting requests at or below it; the order visits the
//               tree depth first, heavier children first, a node's own requests after its
//               children's (ties by first appearance in arrival order). Requests that
//               share a prefix run together while it is cached. Same threshold.
//
// A round is what lies between two iterations. The ranking is kept across rounds until
// a request arrives or comes back, a waiting request's cached prefix changed (its length,
// or for dfs-weight the node it ends at) or, for dfs-weight, one was admitted (the
// weights change): checking that costs one resumed lookup per waiting request
// (KvCacheManager::CachedPrefixTokens); the result is the ranking SGLang computes afresh
// each round.
// Victim: the latest admitted, as FCFS.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/params.h"
#include "core/policy.h"
#include "core/status.h"

namespace servelab {

class PrefixAwarePolicy final : public Policy {
 public:
  enum class Rule : uint8_t { kLongestPrefixMatch, kDfsWeight };
  // REQUIRES: kv has a prefix cache (a radix tree for kDfsWeight); fcfs_threshold >= 0.
  PrefixAwarePolicy(Rule rule, const KvCacheManager* kv, int32_t fcfs_threshold);

  std::string_view Name() const override {
    return rule_ == Rule::kLongestPrefixMatch ? "lpm" : "dfs-weight";
  }
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  void OnStepDone(const StepPlan&, const StepResult&, TimeNs) override { stepped_ = true; }
  size_t NumWaiting() const override { return waiting_.size(); }
  DecodeRunSupport DecodeRuns() const override { return DecodeRunSupport::kEmptyQueue; }

 private:
  void Rank();
  void RankByMatch();
  void RankDepthFirst();
  // What the ranking of `r` depended on: its cached tokens, or the node its match ends at.
  int64_t RankKey(const Request& r) const {
    return rule_ == Rule::kLongestPrefixMatch ? kv_->CachedPrefixTokens(r)
                                              : kv_->LastCachedBlock(r);
  }
  bool RankingStillHolds() const;

  Rule rule_;
  const KvCacheManager* kv_;
  int32_t fcfs_threshold_;
  std::deque<Request*> waiting_;  // FCFS order: arrivals at the back, preempted at the front
  bool ranked_ = false;
  bool stepped_ = false;          // a step committed since the ranking was last checked
  std::vector<Request*> order_;   // the ranking; order_[next_..] not yet admitted
  std::vector<int64_t> keys_;     // RankKey of each when ranked
  size_t next_ = 0;               // order_[next_] is the candidate
};

struct PolicyContext;
StatusOr<std::unique_ptr<Policy>> MakeLpmPolicy(ParamReader& params, const PolicyContext& context);
StatusOr<std::unique_ptr<Policy>> MakeDfsWeightPolicy(ParamReader& params,
                                                      const PolicyContext& context);

}  // namespace servelab
