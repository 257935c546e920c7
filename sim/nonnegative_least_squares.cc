#include "sim/nonnegative_least_squares.h"

#include <algorithm>
#include <limits>

namespace servelab {

Eigen::VectorXd NonNegativeLeastSquares(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                                        const std::vector<bool>& allowed) {
  const Eigen::Index k = a.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(k);
  if (k == 0 || a.rows() == 0) return x;
  // A gradient component below this is zero (scipy's: 10 eps ||A||_1 max(m, n)).
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() * a.cwiseAbs().colwise().sum().maxCoeff() *
                           static_cast<double>(std::max(a.rows(), k));
  std::vector<bool> passive(static_cast<size_t>(k), false);
  auto may_enter = [&](Eigen::Index j) { return allowed.empty() || allowed[static_cast<size_t>(j)]; };
  // The unbounded least squares over the passive columns; 0 elsewhere.
  auto solve_passive = [&]() {
    std::vector<Eigen::Index> columns;
    for (Eigen::Index j = 0; j < k; ++j) {
      if (passive[static_cast<size_t>(j)]) columns.push_back(j);
    }
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(columns.size()));
    for (size_t c = 0; c < columns.size(); ++c) sub.col(static_cast<Eigen::Index>(c)) = a.col(columns[c]);
    const Eigen::VectorXd solved = sub.colPivHouseholderQr().solve(b);
    Eigen::VectorXd s = Eigen::VectorXd::Zero(k);
    for (size_t c = 0; c < columns.size(); ++c) s(columns[c]) = solved(static_cast<Eigen::Index>(c));
    return s;
  };
  // Lawson and Hanson bound their loop by 3k passes; each adds a column or ends.
  for (Eigen::Index pass = 0; pass < 3 * k; ++pass) {
    const Eigen::VectorXd gradient = a.transpose() * (b - a * x);
    Eigen::Index enter = -1;
    double steepest = tolerance;
    for (Eigen::Index j = 0; j < k; ++j) {
      if (!passive[static_cast<size_t>(j)] && may_enter(j) && gradient(j) > steepest) {
        steepest = gradient(j);
        enter = j;
      }
    }
    if (enter < 0) break;  // Karush-Kuhn-Tucker: optimal
    passive[static_cast<size_t>(enter)] = true;
    for (Eigen::Index inner = 0; inner < 3 * k; ++inner) {
      const Eigen::VectorXd s = solve_passive();
      // Step from x toward s as far as every passive coefficient stays >= 0; those that
      // reach 0 leave the passive set.
      double step = std::numeric_limits<double>::infinity();
      Eigen::Index blocking = -1;
      for (Eigen::Index j = 0; j < k; ++j) {
        if (!passive[static_cast<size_t>(j)] || s(j) > 0) continue;
        const double gap = x(j) - s(j);  // >= 0: x(j) >= 0 >= s(j)
        const double to_zero = gap > 0 ? x(j) / gap : 0.0;
        if (to_zero < step) {
          step = to_zero;
          blocking = j;
        }
      }
      if (blocking < 0) {
        x = s;
        break;
      }
      x += step * (s - x);
      for (Eigen::Index j = 0; j < k; ++j) {
        if (passive[static_cast<size_t>(j)] && (j == blocking || x(j) <= 0)) {
          passive[static_cast<size_t>(j)] = false;
          x(j) = 0;
        }
      }
    }
  }
  return x;
}

}  // namespace servelab
