#include "policies/prefix_policies.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <utility>

#include "core/radix_prefix_cache.h"
#include "policies/registry.h"

namespace servelab {

PrefixAwarePolicy::PrefixAwarePolicy(Rule rule, const KvCacheManager* kv, int32_t fcfs_threshold)
    : rule_(rule), kv_(kv), fcfs_threshold_(fcfs_threshold) {
  SERVELAB_CHECK(kv_ != nullptr && kv_->Cache() != nullptr && fcfs_threshold_ >= 0);
  SERVELAB_CHECK(rule_ != Rule::kDfsWeight || kv_->Cache()->Name() == "radix");
}

void PrefixAwarePolicy::Enqueue(Request& request, TimeNs /*now*/) {
  if (request.state == RequestState::kPreempted) {
    waiting_.push_front(&request);
  } else {
    waiting_.push_back(&request);
  }
  ranked_ = false;
}

Request* PrefixAwarePolicy::Peek(TimeNs /*now*/) {
  if (waiting_.empty()) return nullptr;
  if (static_cast<int64_t>(waiting_.size()) > fcfs_threshold_) return waiting_.front();
  if (!ranked_) Rank();
  SERVELAB_CHECK(next_ < order_.size());
  return order_[next_];
}

void PrefixAwarePolicy::Admitted(Request& request, TimeNs /*now*/) {
  const auto it = std::find(waiting_.begin(), waiting_.end(), &request);
  SERVELAB_CHECK(it != waiting_.end());
  waiting_.erase(it);
  if (ranked_ && next_ < order_.size() && order_[next_] == &request) {
    ++next_;
  } else {
    ranked_ = false;  // admitted from the FCFS order: rank again when it matters
  }
}

Request* PrefixAwarePolicy::PickVictim(std::span<Request* const> running, TimeNs /*now*/) {
  return running.empty() ? nullptr : running.back();
}

void PrefixAwarePolicy::Rank() {
  order_.assign(waiting_.begin(), waiting_.end());
  next_ = 0;
  ranked_ = true;
  if (rule_ == Rule::kLongestPrefixMatch) {
    RankByMatch();
  } else {
    RankDepthFirst();
  }
}

void PrefixAwarePolicy::RankByMatch() {
  std::vector<std::pair<int32_t, Request*>> keyed;
  keyed.reserve(order_.size());
  for (Request* r : order_) keyed.emplace_back(kv_->CachedPrefixTokens(*r), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) order_[i] = keyed[i].second;
}

void PrefixAwarePolicy::RankDepthFirst() {
  const auto& tree = static_cast<const RadixPrefixCache&>(*kv_->Cache());
  const int32_t root = tree.Root();
  // The subtree spanned by the waiting requests' match nodes: weights, children in
  // order of first appearance, and each node's own requests in FCFS order. (References
  // into an unordered_map survive its rehashing.)
  struct Node {
    int64_t weight = 0;
    bool linked = false;  // in its parent's children
    std::vector<int32_t> children;
    std::vector<Request*> requests;
  };
  std::unordered_map<int32_t, Node> nodes;
  for (Request* r : order_) {
    const int32_t last = kv_->LastCachedBlock(*r);
    const int32_t at = last >= 0 ? last : root;
    nodes[at].requests.push_back(r);
    for (int32_t n = at;; n = tree.Parent(n)) {
      Node& node = nodes[n];
      ++node.weight;
      if (n == root) break;
      if (!node.linked) {
        node.linked = true;
        nodes[tree.Parent(n)].children.push_back(n);
      }
    }
  }
  order_.clear();
  const std::function<void(int32_t)> visit = [&](int32_t n) {
    Node& node = nodes[n];
    std::stable_sort(node.children.begin(), node.children.end(), [&](int32_t a, int32_t b) {
      return nodes[a].weight > nodes[b].weight;
    });
    for (const int32_t child : node.children) visit(child);
    order_.insert(order_.end(), node.requests.begin(), node.requests.end());
  };
  visit(root);
}

namespace {

StatusOr<std::unique_ptr<Policy>> Make(PrefixAwarePolicy::Rule rule, ParamReader& params,
                                       const PolicyContext& context) {
  const auto threshold =
      static_cast<int32_t>(params.GetInt("fcfs_threshold", 128, Bounds{0, 1'000'000}));
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  const NamedParams& named = params.Named();
  const PrefixCache* cache = context.kv != nullptr ? context.kv->Cache() : nullptr;
  if (cache == nullptr) {
    return InvalidArgument(named.where + ": " + named.path + ": " + named.name +
                           " orders by the prefix cache: set scheduler.prefix_cache "
                           "(type: hash or radix)");
  }
  if (rule == PrefixAwarePolicy::Rule::kDfsWeight && cache->Name() != "radix") {
    return InvalidArgument(named.where + ": " + named.path +
                           ": dfs-weight walks the radix tree: set scheduler.prefix_cache "
                           "to {type: radix}");
  }
  return std::unique_ptr<Policy>(std::make_unique<PrefixAwarePolicy>(rule, context.kv, threshold));
}

}  // namespace

StatusOr<std::unique_ptr<Policy>> MakeLpmPolicy(ParamReader& params, const PolicyContext& context) {
  return Make(PrefixAwarePolicy::Rule::kLongestPrefixMatch, params, context);
}

StatusOr<std::unique_ptr<Policy>> MakeDfsWeightPolicy(ParamReader& params,
                                                      const PolicyContext& context) {
  return Make(PrefixAwarePolicy::Rule::kDfsWeight, params, context);
}

}  // namespace servelab
