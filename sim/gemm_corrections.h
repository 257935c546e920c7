#pragma once
// What a GEMM's fitted form cannot hold at the weight shapes a profile measured: its
// measured time over the form's prediction, by rows (M), for one (op, K, N) on the fitted
// device.
//
// The form (sim/op_model.h) is smooth in M; cuBLAS is not. It picks a kernel per
// (M, N, K) - its tile, its split over K - and the time runs in plateaus and steps: on
// the A100, Llama-2-7B's gate|up GEMM (4096 x 22016) takes 0.184 ms at 168 rows and
// 0.207 ms at 160, 0.39 ms from 392 to 512 rows and 0.46 ms from 520, and its throughput
// at 2,048 rows and more is 200-256 TFLOP/s by shape and M. The form is off by 5-7% a
// GEMM and 3-5% a layer there, in sample, whatever its terms (waves of fitted 2-D tiles
// did worse). A correction holds, for each weight shape measured, the measured / fitted
// ratio at each M measured; between two measured M it is linear, beyond the ends it is
// the end's. The form still carries a fit to other shapes (a TP degree, GPU or model
// whose GEMMs were not measured: no correction applies; another model's GEMM of a
// measured shape takes that shape's) and the correction adds what the profile measured
// of cuBLAS's choices at these shapes, as a table would, without leaving the form.
//
// One-row products of a GEMM with a matrix-vector fit (OpFit::single_row_fitted) are
// that kernel's and are neither in its table nor corrected.
//
// A correction is measured at rows it did not see: LeaveOneOut() is the ratio a row
// would get from its neighbours alone (calibrate's leave-one-out figures). Not quite
// held out: the form was fitted on every row, the left-out one too, and the same errors
// decide which corrections are kept (on Vidur's profiles, all of them).
#include <cstdint>
#include <span>
#include <vector>

#include "core/op.h"

namespace servelab {

struct GemmCorrection {
  Op op = Op::kQkvProj;
  int64_t k = 0, n = 0;        // the weight matrix, [K, N] per GPU
  std::vector<int64_t> rows;   // the M measured, ascending, distinct
  std::vector<double> factor;  // measured / fitted at rows[i]: the median over its rows,
                               // to 1e-6
  // Linear between the measured rows, the end's beyond them. REQUIRES: rows not empty.
  double At(double m) const;
  // At(m) as if `m` had not been measured (its neighbours' interpolation, or the nearest
  // other's at an end); At(m) when it was not. REQUIRES: two or more rows.
  double LeaveOneOut(double m) const;
};

// One measured GEMM row: its op, weight matrix, rows (M) and measured / fitted time.
struct GemmRatio {
  Op op = Op::kQkvProj;
  int64_t k = 0, n = 0;
  int64_t rows = 0;
  double ratio = 1;
};

// A correction per (op, K, N) measured at `min_rows` distinct M or more (fewer: none;
// the form alone) whose factors (each M's median ratio) are all in [1e-3, 1e3], sorted by
// (op, K, N), kept only where it predicts the shape's rows better left out than the form
// does (the sum of |LeaveOneOut / ratio - 1| below the sum
// of |1 / ratio - 1|): a correction that holds only the measurements' noise makes the
// predictions of rows it did not see worse, and is dropped.
std::vector<GemmCorrection> GemmCorrectionsOf(std::vector<GemmRatio> ratios, int32_t min_rows);

// The correction of `op` at [k, n], or null.
const GemmCorrection* FindGemmCorrection(std::span<const GemmCorrection> corrections, Op op,
                                         double k, double n);

}  // namespace servelab
