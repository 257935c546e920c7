#include "policies/prefix_policies.h"

#include <algorithm>
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
  if (ranked_ && stepped_) ranked_ = RankingStillHolds();
  stepped_ = false;
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

bool PrefixAwarePolicy::RankingStillHolds() const {
  // Admissions change dfs-weight's subtree weights (lpm's order of the rest stays).
  if (rule_ == Rule::kDfsWeight && next_ > 0) return false;
  for (size_t i = next_; i < order_.size(); ++i) {
    if (RankKey(*order_[i]) != keys_[i]) return false;
  }
  return true;
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
  keys_.clear();
  for (const Request* r : order_) keys_.push_back(RankKey(*r));
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
  // The subtree spanned by the waiting requests' match nodes. A path is walked up only
  // until it meets a node already linked, so building it costs the nodes it holds, not
  // requests x depth. (References into an unordered_map survive its rehashing.)
  struct Node {
    int64_t weight = 0;   // waiting requests at or below it
    bool linked = false;  // in its parent's children
    std::vector<int32_t> children;  // in order of first appearance
    std::vector<Request*> requests;  // whose match ends here, FCFS
  };
  std::unordered_map<int32_t, Node> nodes;
  nodes[root];
  for (Request* r : order_) {
    const int32_t last = kv_->LastCachedBlock(*r);
    const int32_t at = last >= 0 ? last : root;
    nodes[at].requests.push_back(r);
    for (int32_t n = at; n != root;) {
      Node& node = nodes[n];
      if (node.linked) break;
      node.linked = true;
      const int32_t parent = tree.Parent(n);
      nodes[parent].children.push_back(n);
      n = parent;
    }
  }
  // Weights bottom-up: a preorder listed in reverse has every child before its parent.
  std::vector<int32_t> preorder{root};
  for (size_t i = 0; i < preorder.size(); ++i) {
    const Node& node = nodes[preorder[i]];
    preorder.insert(preorder.end(), node.children.begin(), node.children.end());
  }
  for (auto it = preorder.rbegin(); it != preorder.rend(); ++it) {
    Node& node = nodes[*it];
    node.weight += static_cast<int64_t>(node.requests.size());
    for (const int32_t child : node.children) node.weight += nodes[child].weight;
  }
  // Depth first, heavier children first, a node's own requests after its children's --
  // with an explicit stack: a cached path can be as deep as a prompt is long in blocks.
  order_.clear();
  std::vector<std::pair<int32_t, bool>> stack{{root, false}};  // (node, children pushed)
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    Node& node = nodes[n];
    if (expanded) {
      stack.pop_back();
      order_.insert(order_.end(), node.requests.begin(), node.requests.end());
      continue;
    }
    stack.back().second = true;
    std::stable_sort(node.children.begin(), node.children.end(), [&](int32_t a, int32_t b) {
      return nodes[a].weight > nodes[b].weight;
    });
    for (auto c = node.children.rbegin(); c != node.children.rend(); ++c) stack.emplace_back(*c, false);
  }
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
