#pragma once
// Non-negative least squares: the x >= 0 that minimises ||A x - b||, by Lawson and
// Hanson's active-set method (Solving Least Squares Problems, 1974, chapter 23; scipy's
// nnls is the same method). The problem is convex, so the method ends at its one optimum
// (unique when A's columns are independent): unlike solving without the bound and
// dropping the most negative coefficient until none is left, which can drop a term the
// optimum keeps. sim/calibration.cc fits every op's coefficients with it.
#include <Eigen/Dense>
#include <vector>

namespace servelab {

// `allowed` (empty: every column) holds x_j at 0 where false. Columns of comparable
// scale fit best (the tolerances are relative to A's norm).
Eigen::VectorXd NonNegativeLeastSquares(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                                        const std::vector<bool>& allowed = {});

}  // namespace servelab
