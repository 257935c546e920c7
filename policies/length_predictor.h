#pragma once
// Output-length predictors for the shortest-first policies (sjf, srpt). A prediction is
// a pure function of (experiment seed, request id, target_output_len): it is drawn once
// from a private Rng stream seeded by (seed, Mix(kLengthPredictorStream, id)), so a
// request gets the same prediction in every run and under every policy that uses the
// same predictor settings, whatever order requests arrive or are re-enqueued in.
//
// Kinds (parameter `predictor`):
//   oracle  predicted = target_output_len (the true length).
//   noisy   predicted = true * exp(sigma * Z), Z ~ N(0, 1): lognormal noise whose
//           median is the true length (parameter `sigma`, default 0.5).
//   bucket  a classifier over log2 length buckets [1,2), [2,4), [4,8), ...: with
//           probability `p` (default 0.8) the true bucket, otherwise one of its two
//           neighbours with equal probability, clamped to [0, kMaxBucket] (so bucket 0
//           keeps (1 - p) / 2 of its misses); predicted = the bucket's geometric
//           midpoint 2^(b + 1/2).
#include <cstdint>
#include <string>

#include "core/params.h"
#include "core/request.h"

namespace servelab {

// Mixed with the request id to form each request's predictor stream; distinct from the
// workload's RngStream ids (1..4).
inline constexpr uint64_t kLengthPredictorStream = 0x4C454E50;  // "LENP"

enum class PredictorKind : uint8_t { kOracle, kNoisy, kBucket };

struct LengthPredictorConfig {
  PredictorKind kind = PredictorKind::kOracle;
  double sigma = 0.5;  // noisy: stddev of the log-noise, >= 0
  double p = 0.8;      // bucket: probability of the right bucket, in [0, 1]
};

// Reads `predictor` and, for the kind chosen, its own parameter (`sigma` for noisy, `p`
// for bucket). The other kind's parameter is left unread, so Finish() reports it as
// unknown: `sigma` under `predictor: bucket` is an error, not silently ignored.
LengthPredictorConfig ReadLengthPredictorParams(ParamReader& params);

class LengthPredictor {
 public:
  static constexpr int32_t kMaxBucket = 30;  // [2^30, 2^31) holds every int32 length

  LengthPredictor(const LengthPredictorConfig& config, uint64_t seed)
      : config_(config), seed_(seed) {}

  // Predicted total output tokens of `request` (> 0; not rounded). Deterministic.
  // REQUIRES: request.target_output_len >= 1.
  double Predict(const Request& request) const;

  // floor(log2(len)) for len >= 1: the bucket [2^b, 2^(b+1)) holding len.
  static int32_t BucketOf(int32_t len);
  // 2^(b + 1/2), the geometric midpoint of bucket b.
  static double BucketMidpoint(int32_t bucket);

  const LengthPredictorConfig& Config() const { return config_; }

 private:
  LengthPredictorConfig config_;
  uint64_t seed_;
};

}  // namespace servelab
