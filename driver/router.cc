#include "driver/router.h"

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
}

const RouterRegistry& BuiltinRouters() {
  return BuiltinRegistry<RouterRegistry>("router", RegisterBuiltinRouters);
}

}  // namespace servelab
