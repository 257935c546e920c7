#pragma once
// SGLang's cache-aware router (sgl-router's cache_aware policy; llm-d's prefix scorer is
// the same idea): the router keeps, per replica, an approximate prefix tree of the
// requests it sent there -- their prefix hashes (core/prefix_key.h; a path from the
// root is a chain of them), least recently routed evicted past max_tree_tokens -- and
// for each arrival:
//
//   imbalanced   (max load - min load) > balance_abs_threshold AND
//                max load > balance_rel_threshold x min load, load = running + waiting:
//                the least loaded replica (join the shortest queue);
//   otherwise    the replica whose tree matches the longest leading prefix, if that
//                match covers more than cache_threshold of the prompt; else the replica
//                with the smallest tree (the most room to cache).
//
// Ties go to the lowest index. The chosen replica's tree takes the request's prefix.
// Defaults are sgl-router's: cache_threshold 0.5, balance_abs_threshold 32,
// balance_rel_threshold 1.1; max_tree_tokens 10,000,000 per replica. The tree is the
// router's guess, not the replica's cache: it never sees evictions there.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "driver/router.h"

namespace servelab {

struct CacheAwareRouterOptions {
  double cache_threshold = 0.5;
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.1;
  int64_t max_tree_tokens = 10'000'000;
};

class CacheAwareRouter final : public Router {
 public:
  explicit CacheAwareRouter(CacheAwareRouterOptions options) : options_(options) {}
  std::string_view Name() const override { return "cache_aware"; }
  int32_t Route(const Request& request, std::span<const ReplicaLoad> replicas) override;

  // Tokens of `request`'s leading prefix that replica `i`'s tree holds.
  int64_t MatchedTokens(int32_t i, const Request& request) const;

 private:
  struct Tree {
    std::unordered_map<uint64_t, uint64_t> stamp;  // prefix hash -> last routed
    std::deque<std::pair<uint64_t, uint64_t>> lru;  // (stamp, hash), oldest first; stale
                                                    // entries are skipped
    int64_t tokens = 0;                             // stamp.size() x block tokens
  };
  void Insert(Tree& tree, const Request& request);

  CacheAwareRouterOptions options_;
  std::vector<Tree> trees_;  // by replica, grown on first use
  uint64_t clock_ = 0;
};

}  // namespace servelab
