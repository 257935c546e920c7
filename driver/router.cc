#include "driver/router.h"

#include "driver/cache_aware_router.h"

namespace servelab {
namespace {

class RoundRobinRouter final : public Router {
 public:
  std::string_view Name() const override { return "round_robin"; }
  int32_t Route(const Request&, std::span<const ReplicaLoad> replicas) override {
    const int32_t chosen = next_ % static_cast<int32_t>(replicas.size());
    next_ = chosen + 1;
    return chosen;
  }

 private:
  int32_t next_ = 0;
};

class LeastLoadedRouter final : public Router {
 public:
  std::string_view Name() const override { return "least_loaded"; }
  int32_t Route(const Request&, std::span<const ReplicaLoad> replicas) override {
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(replicas.size()); ++i) {
      if (replicas[i].tokens_pending < replicas[best].tokens_pending) best = i;
    }
    return best;
  }
};

}  // namespace

void RegisterBuiltinRouters(RouterRegistry& registry) {
  registry.Register("round_robin", "replica 0, 1, ..., n-1, 0, ...",
                    [](ParamReader&) -> StatusOr<std::unique_ptr<Router>> {
                      return std::unique_ptr<Router>(std::make_unique<RoundRobinRouter>());
                    });
  registry.Register("least_loaded", "fewest pending prompt + output tokens (join-shortest-queue)",
                    [](ParamReader&) -> StatusOr<std::unique_ptr<Router>> {
                      return std::unique_ptr<Router>(std::make_unique<LeastLoadedRouter>());
                    });
  registry.Register(
      "cache_aware",
      "SGLang's router: longest cached prefix unless the loads are imbalanced",
      [](ParamReader& params) -> StatusOr<std::unique_ptr<Router>> {
        CacheAwareRouterOptions o;
        o.cache_threshold = params.GetDouble("cache_threshold", o.cache_threshold, kUnitInterval);
        o.balance_abs_threshold = params.GetInt("balance_abs_threshold", o.balance_abs_threshold,
                                                Bounds{0, 1e9});
        o.balance_rel_threshold =
            params.GetDouble("balance_rel_threshold", o.balance_rel_threshold, Bounds{1.0, 1e6});
        o.max_tree_tokens =
            params.GetInt("max_tree_tokens", o.max_tree_tokens, Bounds{1, 1e12});
        SERVELAB_RETURN_IF_ERROR(params.Finish());
        return std::unique_ptr<Router>(std::make_unique<CacheAwareRouter>(o));
      });
}

const RouterRegistry& BuiltinRouters() {
  return BuiltinRegistry<RouterRegistry>("router", RegisterBuiltinRouters);
}

}  // namespace servelab
