// Non-negative least squares against hand-solved problems and against the exhaustive
// answer: the optimum is the unbounded least squares on its support, so over every subset
// of columns whose own solution is >= 0, the one with the least residual.
#include "sim/nonnegative_least_squares.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace servelab {
namespace {

// The exhaustive optimum over subsets of the allowed columns (k <= 10).
Eigen::VectorXd Exhaustive(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, const std::vector<bool>& allowed) {
  const Eigen::Index k = a.cols();
  Eigen::VectorXd best = Eigen::VectorXd::Zero(k);
  double best_residual = b.squaredNorm();
  for (uint32_t mask = 1; mask < (1u << k); ++mask) {
    std::vector<Eigen::Index> columns;
    bool ok = true;
    for (Eigen::Index j = 0; j < k; ++j) {
      if ((mask >> j) & 1u) {
        ok = ok && (allowed.empty() || allowed[static_cast<size_t>(j)]);
        columns.push_back(j);
      }
    }
    if (!ok) continue;
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(columns.size()));
    for (size_t c = 0; c < columns.size(); ++c) sub.col(static_cast<Eigen::Index>(c)) = a.col(columns[c]);
    const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(b);
    if ((s.array() < 0).any()) continue;
    Eigen::VectorXd x = Eigen::VectorXd::Zero(k);
    for (size_t c = 0; c < columns.size(); ++c) x(columns[c]) = s(static_cast<Eigen::Index>(c));
    const double residual = (a * x - b).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best = x;
    }
  }
  return best;
}

// By hand: b = (1, 2, 3) against the columns (1, 0, 0), (0, 1, 0), (0, 0, -1): the third
// would be -3; held at 0, the others fit exactly.
TEST(NonNegativeLeastSquaresTest, HandSolved) {
  Eigen::MatrixXd a(3, 3);
  a << 1, 0, 0, 0, 1, 0, 0, 0, -1;
  const Eigen::VectorXd b = Eigen::Vector3d(1, 2, 3);
  const Eigen::VectorXd x = NonNegativeLeastSquares(a, b);
  EXPECT_NEAR(x(0), 1, 1e-12);
  EXPECT_NEAR(x(1), 2, 1e-12);
  EXPECT_EQ(x(2), 0);
  // A column not allowed stays at 0, and the rest fit what they can: b against (1, 1, 0)
  // alone is 1.5.
  Eigen::MatrixXd c(3, 2);
  c << 1, 1, 1, 1, 0, 0;
  const Eigen::VectorXd only = NonNegativeLeastSquares(c, b, {true, false});
  EXPECT_NEAR(only(0), 1.5, 1e-12);
  EXPECT_EQ(only(1), 0);
  // Nothing fits a b that every column points away from.
  EXPECT_EQ(NonNegativeLeastSquares(a, Eigen::Vector3d(-1, -1, 0)).squaredNorm(), 0);
}

// Where dropping the most negative coefficient of the unbounded solution, until none is
// left, goes wrong (calibration's fit did so until 2026-12-03): A's columns (0, -1, 0),
// (-2, 1, 1), (2, 2, 0), b = (3, 2, -2). Unbounded: (-5, -2, -0.5); dropping the first
// column, then the second, leaves (0, 0, 1.25), residual 4.5. The optimum is (1, 0, 1.5):
// A x = (3, 2, 0), residual 4, and the gradient A^T (b - A x) = (0, -2, 0) is <= 0 on the
// coefficient at its bound (Karush-Kuhn-Tucker).
TEST(NonNegativeLeastSquaresTest, KeepsATermTheDropHeuristicLoses) {
  Eigen::MatrixXd a(3, 3);
  a << 0, -2, 2, -1, 1, 2, 0, 1, 0;
  const Eigen::VectorXd b = Eigen::Vector3d(3, 2, -2);
  const Eigen::VectorXd x = NonNegativeLeastSquares(a, b);
  EXPECT_NEAR(x(0), 1, 1e-12);
  EXPECT_EQ(x(1), 0);
  EXPECT_NEAR(x(2), 1.5, 1e-12);
  EXPECT_NEAR((a * x - b).squaredNorm(), 4, 1e-12);
}

// Random problems, some with nearly collinear columns (as a fit's weight bytes and experts
// run are) and some with a column held out: the exhaustive optimum's residual.
TEST(NonNegativeLeastSquaresTest, MatchesTheExhaustiveOptimum) {
  std::mt19937_64 rng(20261203);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> size(1, 7);
  for (int trial = 0; trial < 400; ++trial) {
    const int k = size(rng);
    const int n = k + size(rng) * 2;
    Eigen::MatrixXd a(n, k);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < k; ++j) a(i, j) = normal(rng);
    }
    // Half the trials: columns nearly collinear, as a fit's bytes and experts are.
    if (trial % 2 == 1 && k >= 2) a.col(1) = a.col(0) + 0.05 * a.col(1);
    Eigen::VectorXd b(n);
    for (int i = 0; i < n; ++i) b(i) = normal(rng);
    std::vector<bool> allowed;
    if (trial % 3 == 2) {
      for (int j = 0; j < k; ++j) allowed.push_back(j != trial % k);
    }
    const Eigen::VectorXd x = NonNegativeLeastSquares(a, b, allowed);
    const Eigen::VectorXd best = Exhaustive(a, b, allowed);
    ASSERT_TRUE((x.array() >= 0).all()) << trial;
    for (int j = 0; j < k; ++j) {
      if (!allowed.empty() && !allowed[static_cast<size_t>(j)]) {
        EXPECT_EQ(x(j), 0) << trial;
      }
    }
    EXPECT_NEAR((a * x - b).squaredNorm(), (a * best - b).squaredNorm(), 1e-9 * (1 + b.squaredNorm()))
        << "trial " << trial << " k " << k;
  }
}

}  // namespace
}  // namespace servelab
