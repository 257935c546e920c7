#include "policies/length_predictor.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/rng.h"
#include "core/status.h"

namespace servelab {

LengthPredictorConfig ReadLengthPredictorParams(ParamReader& params) {
  LengthPredictorConfig config;
  const std::string kind = params.GetString("predictor", "oracle", {"oracle", "noisy", "bucket"});
  if (kind == "noisy") {
    config.kind = PredictorKind::kNoisy;
    config.sigma = params.GetDouble("sigma", config.sigma, kNonNegative);
  } else if (kind == "bucket") {
    config.kind = PredictorKind::kBucket;
    config.p = params.GetDouble("p", config.p, kUnitInterval);
  }
  return config;
}

int32_t LengthPredictor::BucketOf(int32_t len) {
  SERVELAB_CHECK(len >= 1);
  return static_cast<int32_t>(std::bit_width(static_cast<uint32_t>(len))) - 1;
}

double LengthPredictor::BucketMidpoint(int32_t bucket) {
  return std::ldexp(std::sqrt(2.0), bucket);
}

double LengthPredictor::Predict(const Request& request) const {
  const int32_t truth = request.target_output_len;
  SERVELAB_CHECK(truth >= 1);
  if (config_.kind == PredictorKind::kOracle) return truth;
  // One stream per request: the draw does not depend on which requests came before.
  Rng rng(seed_, DeriveSeed(kLengthPredictorStream, static_cast<uint64_t>(request.id)));
  if (config_.kind == PredictorKind::kNoisy) {
    return truth * std::exp(config_.sigma * rng.Normal());
  }
  int32_t bucket = BucketOf(truth);
  if (rng.Uniform() >= config_.p) {
    bucket += rng.Uniform() < 0.5 ? -1 : 1;
    bucket = std::clamp(bucket, 0, kMaxBucket);
  }
  return BucketMidpoint(bucket);
}

}  // namespace servelab
