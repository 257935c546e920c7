// The CUDA runner's own kernels (engine/cuda/runner_kernels.h): the fused q|k|v split with
// RoPE and the KV write against the kernels it replaces (ApplyRope then WriteKvCache, on the
// device), seeded random weights (moments, bounds, determinism), bias add and row gather
// against host arithmetic. Without a CUDA device every test reports SKIPPED with the reason.
#include "engine/cuda/runner_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "engine/rope_tables.h"
#include "kernels/cuda/kernels.h"
#include "tests/kernels/cuda_test_util.h"

namespace servelab {
namespace {

using kernels::KvCacheShape;
using kernels::cuda::bf16;
using kernels::testing::CudaTest;
using kernels::testing::DeviceArray;
using kernels::testing::DownloadF32;
using kernels::testing::Sync;
using kernels::testing::UploadBf16;

std::vector<float> Normal(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return kernels::cuda::RoundToBf16(v);
}

// Within one bf16 ulp (2^-7 relative, at the larger magnitude): the two paths compute the
// same f32 expressions, and only the compiler's contraction into FMAs may differ.
bool WithinOneUlp(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::abs(a - b) <= std::ldexp(std::max(std::abs(a), std::abs(b)), -7);
}

class QkvRopeKvWriteTest : public CudaTest,
                           public ::testing::WithParamInterface<std::tuple<int32_t, int32_t, int32_t>> {};

TEST_P(QkvRopeKvWriteTest, MatchesApplyRopeThenWriteKvCache) {
  const auto [heads, kv_heads, head_dim] = GetParam();
  const KvCacheShape shape{12, 16, kv_heads, head_dim};
  const int32_t tokens = 37;
  const int64_t qd = int64_t{heads} * head_dim, kvd = int64_t{kv_heads} * head_dim;
  const std::vector<float> qkv = Normal(tokens * (qd + 2 * kvd), rng_);
  std::vector<int32_t> positions(tokens);
  std::vector<int64_t> slots(tokens);
  std::vector<int64_t> all(shape.NumSlots());
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng_);
  for (int32_t t = 0; t < tokens; ++t) {
    positions[t] = (t * 97 + 5) % 3000;  // large angles too
    slots[t] = t % 6 == 5 ? -1 : all[t];  // some padding
  }
  // Split on the host for the reference path.
  std::vector<float> q(tokens * qd), k(tokens * kvd), v(tokens * kvd);
  for (int32_t t = 0; t < tokens; ++t) {
    const float* row = qkv.data() + t * (qd + 2 * kvd);
    std::copy_n(row, qd, q.begin() + t * qd);
    std::copy_n(row + qd, kvd, k.begin() + t * kvd);
    std::copy_n(row + qd + kvd, kvd, v.begin() + t * kvd);
  }
  ModelConfig config;
  config.spec.hidden_size = heads * head_dim;
  config.spec.num_attention_heads = heads;
  config.spec.head_dim = head_dim;
  config.spec.rope_theta = 500000.0;
  const std::vector<float> freqs = ModelRopeInvFreq(config);
  DeviceArray<float> d_freqs(freqs);
  DeviceArray<int32_t> d_pos(positions);
  DeviceArray<int64_t> d_slots(slots);

  DeviceArray<bf16> d_q = UploadBf16(q), d_k = UploadBf16(k), d_v = UploadBf16(v);
  DeviceArray<bf16> want_k(shape.NumElements()), want_v(shape.NumElements());
  want_k.Poison();
  want_v.Poison();
  kernels::cuda::ApplyRope(d_q.get(), d_k.get(), d_pos.get(), d_freqs.get(), tokens, heads,
                           kv_heads, head_dim, nullptr);
  kernels::cuda::WriteKvCache(want_k.get(), want_v.get(), d_k.get(), d_v.get(), d_slots.get(),
                              tokens, shape, nullptr);

  DeviceArray<bf16> d_qkv = UploadBf16(qkv);
  DeviceArray<bf16> got_q(tokens * qd), got_k(shape.NumElements()), got_v(shape.NumElements());
  got_q.Poison();
  got_k.Poison();
  got_v.Poison();
  engine_cuda::QkvRopeKvWrite(got_q.get(), got_k.get(), got_v.get(), d_qkv.get(), d_pos.get(),
                              d_freqs.get(), d_slots.get(), tokens, heads, shape, nullptr);
  Sync();
  int bad = 0;
  auto compare = [&bad](const std::vector<float>& got, const std::vector<float>& want,
                        bool exact, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const bool same = exact ? (std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i])
                              : WithinOneUlp(got[i], want[i]);
      if (!same && bad++ < 5) ADD_FAILURE() << what << " " << i << ": " << got[i] << " vs " << want[i];
    }
  };
  compare(DownloadF32(got_q), DownloadF32(d_q), false, "q");
  compare(DownloadF32(got_k), DownloadF32(want_k), false, "k cache");  // NaN where unwritten
  compare(DownloadF32(got_v), DownloadF32(want_v), true, "v cache");
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(HeadsKvHeadsDim, QkvRopeKvWriteTest,
                         ::testing::Values(std::tuple{32, 8, 128}, std::tuple{4, 4, 64},
                                           std::tuple{8, 1, 64}, std::tuple{4, 2, 256}));

TEST_F(CudaTest, FillRandomIsABoundedSeededBell) {
  const int64_t n = int64_t{1} << 20;
  DeviceArray<bf16> a(n), b(n), c(n);
  engine_cuda::FillRandomBf16(a.get(), n, 7, 3, 0.0f, 0.02f, nullptr);
  engine_cuda::FillRandomBf16(b.get(), n, 7, 3, 0.0f, 0.02f, nullptr);
  engine_cuda::FillRandomBf16(c.get(), n, 7, 4, 1.0f, 0.02f, nullptr);
  Sync();
  const std::vector<float> x = DownloadF32(a), y = DownloadF32(b), z = DownloadF32(c);
  EXPECT_EQ(x, y);  // the same (seed, tensor): the same values
  double sum = 0, sum_sq = 0, z_sum = 0;
  float lo = 0, hi = 0;
  size_t same_as_other = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sum_sq += double{x[i]} * x[i];
    z_sum += z[i];
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    same_as_other += x[i] == z[i] - 1.0f;
  }
  const double mean = sum / n, sd = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);          // standard error 0.02 / 1024
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.01);    // bf16 rounding and sampling: well under 1%
  EXPECT_NEAR(z_sum / n, 1.0, 1e-3);     // norm-weight style: mean 1
  EXPECT_GE(lo, -0.02f * 3.4642f * 1.01f);  // bounded by +-2 sqrt(3) sd (bf16 rounding)
  EXPECT_LE(hi, 0.02f * 3.4642f * 1.01f);
  EXPECT_LT(lo, -0.02f * 2.5f);          // ... and reaching well into the tails
  EXPECT_LT(same_as_other, static_cast<size_t>(n / 50));  // another tensor: other values
}

TEST_F(CudaTest, AddBiasAndGatherRowsMatchTheHost) {
  const int32_t rows = 9, cols = 200;
  const std::vector<float> x = Normal(rows * cols, rng_), bias = Normal(cols, rng_);
  DeviceArray<bf16> d_x = UploadBf16(x), d_bias = UploadBf16(bias);
  engine_cuda::AddBias(d_x.get(), d_bias.get(), rows, cols, nullptr);
  const std::vector<int32_t> pick{8, 0, 3, 3};
  DeviceArray<int32_t> d_pick(pick);
  DeviceArray<bf16> gathered(pick.size() * cols);
  gathered.Poison();
  engine_cuda::GatherRows(gathered.get(), d_x.get(), d_pick.get(), 4, cols, nullptr);
  Sync();
  const std::vector<float> sum = DownloadF32(d_x), got = DownloadF32(gathered);
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < cols; ++c) {
      const float want = kernels::cuda::RoundToBf16({x[r * cols + c] + bias[c]})[0];
      ASSERT_EQ(sum[r * cols + c], want) << r << "," << c;
    }
  }
  for (size_t e = 0; e < pick.size(); ++e) {
    for (int32_t c = 0; c < cols; ++c) ASSERT_EQ(got[e * cols + c], sum[pick[e] * cols + c]);
  }
}

}  // namespace
}  // namespace servelab
