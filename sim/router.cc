#include "sim/router.h"

#include "core/params.h"
#include "core/text.h"

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

std::vector<std::string> RouterNames() { return {"least_loaded", "round_robin"}; }

StatusOr<std::unique_ptr<Router>> MakeRouter(const NamedParams& config) {
  ParamReader params(config);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  if (config.name == "round_robin") return std::unique_ptr<Router>(new RoundRobinRouter());
  if (config.name == "least_loaded") return std::unique_ptr<Router>(new LeastLoadedRouter());
  std::string where = config.where.empty() ? "" : config.where + ": ";
  return InvalidArgument(where + config.path + ": " +
                         UnknownNameMessage("router", config.name, RouterNames()));
}

}  // namespace servelab
