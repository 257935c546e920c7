#include "driver/cache_aware_router.h"

#include <algorithm>

namespace servelab {
namespace {

int64_t Load(const ReplicaLoad& r) { return int64_t{r.num_running} + r.num_waiting; }

// Leading prefix blocks of a request that its hashes identify.
size_t NumIdentified(const Request& r) {
  if (r.prefix_block_tokens <= 0) return 0;
  return std::min(r.prefix_block_hashes.size(),
                  static_cast<size_t>((int64_t{r.prefix_identified_tokens} + r.prefix_block_tokens - 1) /
                                      r.prefix_block_tokens));
}

}  // namespace

int64_t CacheAwareRouter::MatchedTokens(int32_t i, const Request& request) const {
  if (static_cast<size_t>(i) >= trees_.size()) return 0;
  const Tree& tree = trees_[static_cast<size_t>(i)];
  const size_t n = NumIdentified(request);
  size_t matched = 0;
  while (matched < n && tree.stamp.contains(request.prefix_block_hashes[matched])) ++matched;
  return std::min<int64_t>(static_cast<int64_t>(matched) * request.prefix_block_tokens,
                           request.prefix_identified_tokens);
}

void CacheAwareRouter::Insert(Tree& tree, const Request& request) {
  const size_t n = NumIdentified(request);
  for (size_t j = 0; j < n; ++j) {
    const uint64_t hash = request.prefix_block_hashes[j];
    auto [it, fresh] = tree.stamp.try_emplace(hash, 0);
    it->second = ++clock_;
    tree.lru.emplace_back(it->second, hash);
    if (fresh) tree.tokens += request.prefix_block_tokens;
  }
  // Least recently routed first; a block's tokens are those of the request that added
  // it (one granularity per workload).
  while (tree.tokens > options_.max_tree_tokens && !tree.lru.empty()) {
    const auto [stamp, hash] = tree.lru.front();
    tree.lru.pop_front();
    const auto it = tree.stamp.find(hash);
    if (it == tree.stamp.end() || it->second != stamp) continue;  // routed again since
    tree.stamp.erase(it);
    tree.tokens -= request.prefix_block_tokens;
  }
  if (tree.lru.size() > 4 * tree.stamp.size() + 1024) {  // drop the stale entries
    std::deque<std::pair<uint64_t, uint64_t>> live;
    for (const auto& e : tree.lru) {
      const auto it = tree.stamp.find(e.second);
      if (it != tree.stamp.end() && it->second == e.first) live.push_back(e);
    }
    tree.lru.swap(live);
  }
}

int32_t CacheAwareRouter::Route(const Request& request, std::span<const ReplicaLoad> replicas) {
  const auto n = static_cast<int32_t>(replicas.size());
  if (trees_.size() < replicas.size()) trees_.resize(replicas.size());
  int32_t least = 0;
  int64_t max_load = Load(replicas[0]);
  for (int32_t i = 1; i < n; ++i) {
    if (Load(replicas[i]) < Load(replicas[least])) least = i;
    max_load = std::max(max_load, Load(replicas[i]));
  }
  const int64_t min_load = Load(replicas[least]);
  const bool imbalanced =
      max_load - min_load > options_.balance_abs_threshold &&
      static_cast<double>(max_load) > options_.balance_rel_threshold * static_cast<double>(min_load);
  int32_t chosen = least;
  if (!imbalanced) {
    int32_t best = 0, smallest = 0;
    int64_t best_tokens = MatchedTokens(0, request);
    for (int32_t i = 1; i < n; ++i) {
      const int64_t t = MatchedTokens(i, request);
      if (t > best_tokens) {
        best = i;
        best_tokens = t;
      }
      if (trees_[static_cast<size_t>(i)].tokens < trees_[static_cast<size_t>(smallest)].tokens) {
        smallest = i;
      }
    }
    const double rate = static_cast<double>(best_tokens) / std::max(1, request.prompt_len);
    chosen = rate > options_.cache_threshold ? best : smallest;
  }
  Insert(trees_[static_cast<size_t>(chosen)], request);
  return chosen;
}

}  // namespace servelab
