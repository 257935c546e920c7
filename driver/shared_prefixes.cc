#include "driver/shared_prefixes.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/prefix_key.h"

namespace servelab {

StatusOr<SharedPrefixes> SharedPrefixes::Make(const SharedPrefixConfig& config, uint64_t seed) {
  if (config.num_prompts < 1 || config.num_prompts > 1'000'000) {
    return InvalidArgument("workload.prefix.num_prompts: must be in [1, 1000000], got " +
                           std::to_string(config.num_prompts));
  }
  if (!(config.popularity_theta >= 0 && config.popularity_theta <= 100)) {
    return InvalidArgument("workload.prefix.popularity_theta: must be in [0, 100]");
  }
  if (!(config.share >= 0 && config.share <= 1)) {
    return InvalidArgument("workload.prefix.share: must be in [0, 1]");
  }
  auto lengths = LengthDistribution::Make(config.prompt_tokens, "workload.prefix.prompt_tokens");
  if (!lengths.ok()) return lengths.status();
  SharedPrefixes p;
  p.config_ = config;
  Rng rng(seed, RngStream::kPrefixLengths);
  double total = 0;
  int64_t total_tokens = 0;
  for (int32_t k = 0; k < config.num_prompts; ++k) {
    const int32_t length = lengths->Sample(rng);
    total_tokens += length;
    if (total_tokens > kMaxSharedPrefixTokens) {  // before their hashes are allocated
      return InvalidArgument("workload.prefix: the system prompts come to more than " +
                             std::to_string(kMaxSharedPrefixTokens) +
                             " tokens; fewer or shorter prompts");
    }
    p.lengths_.push_back(length);
    // Content ids: the prompt's index and the block's position, then chained.
    std::vector<uint64_t> ids(static_cast<size_t>(length / kSharedPrefixBlockTokens));
    for (size_t j = 0; j < ids.size(); ++j) ids[j] = MixKey(static_cast<uint64_t>(k), j);
    ChainPrefixHashes(ids);
    p.hashes_.push_back(std::move(ids));
    total += std::pow(static_cast<double>(k + 1), -config.popularity_theta);
    p.cdf_.push_back(total);
  }
  for (double& c : p.cdf_) c /= total;
  p.cdf_.back() = 1.0;  // Uniform() < 1: the search always lands inside
  return p;
}

void SharedPrefixes::Apply(Rng& rng, Request& request) const {
  request.prefix_block_hashes.clear();
  request.prefix_block_tokens = 0;
  request.prefix_identified_tokens = 0;
  // Two draws per request whatever the outcome, so one request's choice never shifts
  // the next one's.
  const double has = rng.Uniform();
  const double pick = rng.Uniform();
  if (has >= config_.share) return;
  const auto k = static_cast<size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), pick) - cdf_.begin());
  const int64_t length = int64_t{request.prompt_len} + lengths_[k];
  request.prompt_len = static_cast<int32_t>(
      std::min<int64_t>(length, std::numeric_limits<int32_t>::max()));
  request.prefix_block_hashes.assign(hashes_[k].begin(), hashes_[k].end());
  request.prefix_block_tokens = kSharedPrefixBlockTokens;
  request.prefix_identified_tokens =
      static_cast<int32_t>(hashes_[k].size()) * kSharedPrefixBlockTokens;
}

}  // namespace servelab
