#pragma once
// Shared system prompts for synthetic workloads (workload.prefix, SharedPrefixConfig):
// a fixed set of prompts, each with its own prefix hashes (core/prefix_key.h) at
// kSharedPrefixBlockTokens-token granularity, prepended to requests by popularity.
#include <cstdint>
#include <vector>

#include "core/request.h"
#include "core/rng.h"
#include "core/status.h"
#include "driver/length_distribution.h"
#include "driver/workload_config.h"

namespace servelab {

// Granularity of a shared prompt's hashes: a tail shorter than this is not identified
// (it shares a hash block with the request's own tokens), so at most 15 of its tokens
// are computed again by each request.
inline constexpr int32_t kSharedPrefixBlockTokens = 16;
// All system prompts together (their hashes: 8M, 64 MB).
inline constexpr int64_t kMaxSharedPrefixTokens = int64_t{1} << 27;

class SharedPrefixes {
 public:
  // Draws every prompt's length from the experiment seed's kPrefixLengths stream.
  static StatusOr<SharedPrefixes> Make(const SharedPrefixConfig& config, uint64_t seed);

  // With probability `share` (a draw from `rng`), prepends a prompt chosen by
  // popularity: prompt_len grows by its length (saturating at INT32_MAX; such a
  // request is rejected as too long), and the request's prefix hashes become its.
  // Otherwise leaves the request without a prefix.
  void Apply(Rng& rng, Request& request) const;

  int32_t NumPrompts() const { return static_cast<int32_t>(lengths_.size()); }
  int32_t PromptTokens(int32_t k) const { return lengths_[static_cast<size_t>(k)]; }

 private:
  SharedPrefixConfig config_;
  std::vector<int32_t> lengths_;               // by prompt
  std::vector<std::vector<uint64_t>> hashes_;  // by prompt: one per full 16-token block
  std::vector<double> cdf_;                    // popularity, last entry exactly 1
};

}  // namespace servelab
