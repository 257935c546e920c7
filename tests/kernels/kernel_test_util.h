#pragma once
// Helpers shared by the kernel tests: seeded random tensors, NaN poisoning, and a
// relative comparison against float64 references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace servelab::kernels::testing {

// n values drawn from N(0, stddev^2), f32.
inline std::vector<float> RandomNormal(size_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Fills with quiet NaN, so an element a kernel forgets to write fails every comparison.
inline void Poison(std::span<float> v) {
  std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN());
}

// EXPECTs |got[i] - want[i]| <= rel * max|want[row]| for every element, row by row
// (a row is `row_len` consecutive elements, e.g. one head's head_dim outputs). Relative
// to the row's magnitude, not the element's, so outputs near zero need no special case.
inline void ExpectRowsNear(std::span<const float> got, std::span<const double> want, size_t row_len,
                           double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.size() % row_len, 0u) << what;
  int failures = 0;
  for (size_t r = 0; r < got.size() / row_len; ++r) {
    double scale = 0.0;
    for (size_t i = 0; i < row_len; ++i) scale = std::max(scale, std::abs(want[r * row_len + i]));
    const double tol = rel * std::max(scale, 1e-30);
    for (size_t i = 0; i < row_len; ++i) {
      const size_t at = r * row_len + i;
      const double err = std::abs(static_cast<double>(got[at]) - want[at]);
      if (!(err <= tol) && failures++ < 5) {  // !(<=) also catches NaN
        ADD_FAILURE() << what << ": row " << r << " element " << i << ": got " << got[at]
                      << ", want " << want[at] << " (tolerance " << tol << ")";
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace servelab::kernels::testing
