// The CUDA sampling kernels against their CPU twins. TopPSample: random rows of vocab 1000,
// 32000 and 128256, f32 and bf16 logits (the twin sees the bf16 values as f32), temperatures,
// top-k and top-p varying by row; device outputs poisoned (all-ones bytes: -1) before every
// launch. Without a CUDA device every test reports SKIPPED with the runtime's reason.
//
// Expected agreement: every id. Both sides compute the same integer weights (TopPWeight is
// compiled from one header for host and device, correctly rounded operations only) and
// exact integer masses, so no summation order can separate them. Random rows are still
// allowed to differ where the draw point or the top-p target lies within kBoundaryEps of the
// kept mass from a decision boundary, since there a weight off by a few f32 ulps (a
// toolchain that stopped honouring fmaf or IEEE division, e.g. --use_fast_math) could flip
// the token; such rows are counted and printed. Every other row must match.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/kernels.h"
#include "kernels/kernel_check.h"
#include "kernels/top_p_sample.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using cuda::bf16;
using cuda::RoundToBf16;
using testing::CudaOk;
using testing::CudaTest;
using testing::DeviceArray;
using testing::DownloadF32;
using testing::RandomNormal;
using testing::Sync;
using testing::UploadBf16;

// Relative to the kept mass, about 8 f32 ulps: weights off by a relative d move every
// cumulative / mass by at most 2d. Large flat rows have cumulatives ~1/V apart, so a fair
// share of them is flagged (the test prints how many, and how many of those differ); the
// hand-made rows, exactly on boundaries by design, are held to exact equality.
constexpr double kBoundaryEps = 1e-6;

// A batch of rows for TopPSample, host side.
struct Batch {
  int32_t rows = 0, vocab = 0;
  std::vector<float> logits;  // [rows, vocab]: what the twin reads
  std::vector<float> temperatures, top_ps;
  std::vector<int32_t> top_ks;
  std::vector<double> uniforms;

  void Add(const std::vector<float>& row, float temperature, int32_t top_k, float top_p,
           double u) {
    logits.insert(logits.end(), row.begin(), row.end());
    temperatures.push_back(temperature);
    top_ks.push_back(top_k);
    top_ps.push_back(top_p);
    uniforms.push_back(u);
    ++rows;
  }
  const float* Row(int32_t t) const { return logits.data() + int64_t{t} * vocab; }
};

// Rows of N(0, s^2) logits, s varying from flat to peaked, a masked (-inf) third of the ids
// on some; every (temperature, top_k, top_p) below in turn; u uniform, with both ends.
Batch RandomBatch(int32_t vocab, int32_t rows, bool bf16_values, std::mt19937& rng) {
  const float stddevs[] = {0.5f, 2.0f, 4.0f, 12.0f};
  const float temperatures[] = {0.3f, 0.7f, 1.0f, 1.6f};
  const int32_t top_ks[] = {0, 1, 20, 1000, 0, 50};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.95f, 0.1f};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Batch batch;
  batch.vocab = vocab;
  for (int32_t t = 0; t < rows; ++t) {
    auto row = RandomNormal(vocab, rng, stddevs[t % 4]);
    if (t % 7 == 3) {
      for (int32_t i = 0; i < vocab; i += 3) row[i] = -std::numeric_limits<float>::infinity();
    }
    if (bf16_values) row = RoundToBf16(row);  // many ties: bf16 keeps 8 bits of mantissa
    const double u = t % 11 == 0 ? 0.0 : t % 13 == 0 ? std::nextafter(1.0, 0.0) : uniform(rng);
    batch.Add(row, temperatures[t % 4], top_ks[t % 6], top_ps[t % 5], u);
  }
  return batch;
}

// Whether row t's token is decided within kBoundaryEps: the top-p target next to a prefix
// mass, or the draw point next to a cumulative of the kept set. Recomputes the rule's
// integers with the header's functions.
bool NearBoundary(const Batch& b, int32_t t) {
  const float* row = b.Row(t);
  const int32_t n = b.vocab;
  const float max_logit = *std::max_element(row, row + n);
  std::vector<uint32_t> keys(n);
  std::vector<uint64_t> q(n);
  for (int32_t i = 0; i < n; ++i) {
    keys[i] = TopPOrderKey(row[i]);
    q[i] = TopPWeight(row[i], max_logit, b.temperatures[t]);
  }
  std::vector<int32_t> by_rank(n);
  std::iota(by_rank.begin(), by_rank.end(), 0);
  std::sort(by_rank.begin(), by_rank.end(), [&](int32_t a, int32_t c) { return keys[a] > keys[c]; });
  const int32_t k = b.top_ks[t];
  uint32_t lambda = keys[by_rank[k > 0 && k < n ? k - 1 : n - 1]];
  auto mass_from = [&](uint32_t lo) {
    uint64_t m = 0;
    for (int32_t i = 0; i < n; ++i) m += keys[i] >= lo ? q[i] : 0;
    return m;
  };
  bool near = false;
  if (b.top_ps[t] < 1.0f) {
    const auto mass_k = static_cast<double>(mass_from(lambda));
    const double target = double{b.top_ps[t]} * mass_k;
    uint64_t running = 0;
    for (int32_t r = 0; r < n; ++r) {
      running += q[by_rank[r]];
      if (r + 1 < n && keys[by_rank[r + 1]] == keys[by_rank[r]]) continue;  // inside a tie
      if (std::abs(static_cast<double>(running) - target) <= kBoundaryEps * mass_k) near = true;
      if (static_cast<double>(running) >= target) {
        lambda = keys[by_rank[r]];
        break;
      }
    }
  }
  const uint64_t mass = mass_from(lambda);
  const double draw = b.uniforms[t] * static_cast<double>(mass);
  uint64_t running = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (keys[i] < lambda || q[i] == 0) continue;
    running += q[i];
    if (std::abs(static_cast<double>(running) - draw) <= kBoundaryEps * static_cast<double>(mass)) {
      near = true;
    }
  }
  return near;
}

// Runs the batch through the twin and the kernel (f32 or bf16 logits) and compares; rows
// near a boundary may differ unless `strict`.
void ExpectMatchesTwin(const Batch& b, bool bf16_logits, bool strict, const std::string& what) {
  std::vector<int32_t> want(b.rows, -1);
  cpu::TopPSample(want.data(), b.logits.data(), b.temperatures.data(), b.top_ks.data(),
                  b.top_ps.data(), b.uniforms.data(), b.rows, b.vocab);
  DeviceArray<float> d_temperatures(b.temperatures), d_top_ps(b.top_ps);
  DeviceArray<int32_t> d_top_ks(b.top_ks), d_ids(b.rows);
  DeviceArray<double> d_uniforms(b.uniforms);
  d_ids.Poison();
  if (bf16_logits) {
    DeviceArray<bf16> d_logits(cuda::ToBf16(b.logits));
    cuda::TopPSample(d_ids.get(), d_logits.get(), d_temperatures.get(), d_top_ks.get(),
                     d_top_ps.get(), d_uniforms.get(), b.rows, b.vocab, nullptr);
    Sync();
  } else {
    DeviceArray<float> d_logits(b.logits);
    cuda::TopPSample(d_ids.get(), d_logits.get(), d_temperatures.get(), d_top_ks.get(),
                     d_top_ps.get(), d_uniforms.get(), b.rows, b.vocab, nullptr);
    Sync();
  }
  const std::vector<int32_t> got = d_ids.Download();
  int near = 0, near_differ = 0;
  for (int32_t t = 0; t < b.rows; ++t) {
    const bool at_boundary = NearBoundary(b, t);
    near += at_boundary ? 1 : 0;
    if (got[t] == want[t]) continue;
    if (at_boundary && !strict) {
      ++near_differ;
    } else {
      ADD_FAILURE() << what << ", row " << t << " (T " << b.temperatures[t] << ", k "
                    << b.top_ks[t] << ", p " << b.top_ps[t] << ", u " << b.uniforms[t]
                    << "): device " << got[t] << ", twin " << want[t];
    }
  }
  // Shown, not asserted: by construction even these rows should match.
  std::printf("%s: %d rows, %d near a boundary, %d of those differ\n", what.c_str(), b.rows,
              near, near_differ);
}

TEST_F(CudaTest, TopPSampleMatchesTwinOnRandomRows) {
  for (const int32_t vocab : {1000, 32000, 128256}) {
    const int32_t rows = vocab > 100000 ? 24 : 60;
    for (const bool bf16_logits : {false, true}) {
      const Batch batch = RandomBatch(vocab, rows, bf16_logits, rng_);
      ExpectMatchesTwin(batch, bf16_logits, /*strict=*/false,
                        std::string(bf16_logits ? "bf16" : "f32") + " vocab " +
                            std::to_string(vocab));
    }
  }
}

TEST_F(CudaTest, TopPSampleMatchesTwinOnTiesAndExactBoundaries) {
  // Hand-made rows where the strict and tie rules decide: draw points exactly on a
  // cumulative (equal weights, u = j / 4 of a power-of-two mass), ties at the top-k and
  // top-p thresholds, masked tokens, a cold temperature, a single finite logit.
  const float inf = std::numeric_limits<float>::infinity();
  Batch b;
  b.vocab = 8;
  const std::vector<float> equal(8, 0.5f);
  for (double u : {0.0, 0.125, 0.25, 0.5, 0.875, std::nextafter(0.25, 0.0)}) {
    b.Add(equal, 1.0f, 0, 1.0f, u);
  }
  const std::vector<float> tied = {2.0f, 5.0f, 5.0f, 1.0f, 5.0f, -1.0f, 0.0f, 5.0f};
  for (int32_t k : {1, 2, 4, 5}) {
    for (double u : {0.1, 0.3, 0.6, 0.9}) b.Add(tied, 1.0f, k, 1.0f, u);
  }
  for (float p : {0.01f, 0.5f, 0.99f}) b.Add(tied, 0.8f, 0, p, 0.7);
  const std::vector<float> masked = {-inf, 0.0f, -inf, -inf, 0.0f, -inf, -inf, -inf};
  for (double u : {0.0, 0.4999, 0.5, 0.9999}) b.Add(masked, 1.0f, 3, 1.0f, u);
  const std::vector<float> single = {-inf, -inf, -inf, -inf, -inf, -inf, 3.0f, -inf};
  b.Add(single, 1.0f, 0, 0.5f, 0.9);
  b.Add({0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f}, 1e-3f, 0, 1.0f, 0.99);
  // Exactly on boundaries by design, and decided by integers: no row may differ.
  ExpectMatchesTwin(b, /*bf16_logits=*/false, /*strict=*/true, "hand-made f32");
  ExpectMatchesTwin(b, /*bf16_logits=*/true, /*strict=*/true, "hand-made bf16");  // exact in bf16
}

TEST_F(CudaTest, TopPSampleWithNoRowsLaunchesNothing) {
  DeviceArray<int32_t> d_ids(1);
  d_ids.Poison();
  cuda::TopPSample(d_ids.get(), static_cast<const float*>(nullptr), nullptr, nullptr, nullptr,
                   nullptr, 0, 1000, nullptr);
  Sync();
  EXPECT_EQ(d_ids.Download(), std::vector<int32_t>{-1});
}

}  // namespace
}  // namespace servelab::kernels
