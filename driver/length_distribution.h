#pragma once
// Token-length distributions for synthetic workloads (LengthDistConfig is the spec).
//
// Every sample is rounded to the nearest integer and clamped to [max(min, 1), max]
// (max 0 = no upper bound; values also stop at INT32_MAX), so it is always >= 1.
//   fixed      value
//   uniform    integers in [min, max], each equally likely
//   normal     Normal(mean, std)
//   lognormal  mean and cv of the distribution itself (not of its log)
//   zipf       P(k) proportional to k^-theta for k in [min, max], by binary search in a
//              precomputed CDF table (one double per value: max - min + 1 <= 2^24)
//   empirical  a uniformly chosen row of a file: a CSV with a header row, sampling
//              `column` (default: the first), or a file of one number per line (no
//              header: the first line is a number). Blank lines are skipped; every other
//              row must hold a number >= 0 in the column. Values are clamped like samples.
// Two empirical distributions over the same file can be sampled jointly (same row for
// both) through NumRows() / Row(): the workload does this for input and output lengths
// so that their correlation survives.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/rng.h"
#include "driver/workload_config.h"

namespace servelab {

class LengthDistribution {
 public:
  // Validates `config` and, for empirical, reads its file. Errors name `key` (the config
  // path of this distribution, e.g. "workload.input_tokens") and, for file contents,
  // "path:LINE".
  static StatusOr<LengthDistribution> Make(const LengthDistConfig& config, std::string_view key);

  // One length >= 1. Draws from `rng` only (never from another stream).
  int32_t Sample(Rng& rng) const;

  // Empirical only: the number of rows and the (clamped) length of row `i`.
  bool IsEmpirical() const { return config_.dist == LengthDist::kEmpirical; }
  size_t NumRows() const { return rows_.size(); }
  int32_t Row(size_t i) const { return rows_[i]; }
  // A uniformly random row index. REQUIRES: IsEmpirical().
  size_t SampleRow(Rng& rng) const;

  // Rounds and clamps a raw value to this distribution's [lo, hi].
  int32_t Clamp(double x) const;

 private:
  LengthDistConfig config_;
  int64_t lo_ = 1;                 // max(config.min, 1)
  int64_t hi_ = INT32_MAX;         // config.max, or INT32_MAX when 0
  LogParams log_params_;           // lognormal
  std::vector<double> zipf_cdf_;   // zipf: P(X <= min + i), last entry exactly 1
  std::vector<int32_t> rows_;      // empirical: clamped values, file order
};

// Reads the numbers of an empirical length file (see above), unclamped and rounded.
// `key` names the config entry in errors.
StatusOr<std::vector<int64_t>> ReadLengthColumn(const std::string& path,
                                                const std::string& column, std::string_view key);

}  // namespace servelab
