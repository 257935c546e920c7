#include "kernels/rms_norm.h"

#include <cmath>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {
namespace {

// 1 / sqrt(mean(x^2) + eps) over one row of `hidden`, f32 accumulation.
float InvRms(const float* x, int32_t hidden, float eps) {
  float sum_sq = 0.0f;
  for (int32_t i = 0; i < hidden; ++i) sum_sq += x[i] * x[i];
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + eps);
}

}  // namespace

void RmsNorm(float* out, const float* x, const float* weight, int32_t num_tokens, int32_t hidden,
             float eps) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && hidden > 0);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* in_row = x + int64_t{t} * hidden;
    float* out_row = out + int64_t{t} * hidden;
    const float inv_rms = InvRms(in_row, hidden, eps);  // read fully before out may overwrite
    for (int32_t i = 0; i < hidden; ++i) out_row[i] = in_row[i] * inv_rms * weight[i];
  }
}

void FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t num_tokens,
                     int32_t hidden, float eps) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && hidden > 0);
  for (int32_t t = 0; t < num_tokens; ++t) {
    float* x_row = x + int64_t{t} * hidden;
    float* res_row = residual + int64_t{t} * hidden;
    for (int32_t i = 0; i < hidden; ++i) res_row[i] += x_row[i];
    const float inv_rms = InvRms(res_row, hidden, eps);
    for (int32_t i = 0; i < hidden; ++i) x_row[i] = res_row[i] * inv_rms * weight[i];
  }
}

}  // namespace servelab::kernels::cpu
