// GEMM corrections: linear between the measured rows and held beyond them, the median of
// the rows measured at one M, one table per (op, K, N), and kept only where it predicts
// rows it did not see better than the form does.
#include "sim/gemm_corrections.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

GemmCorrection Table() {
  GemmCorrection c;
  c.op = Op::kGateUpProj;
  c.k = 4096;
  c.n = 22016;
  c.rows = {4, 8, 16};
  c.factor = {1.2, 1.0, 0.9};
  return c;
}

TEST(GemmCorrectionTest, LinearBetweenTheMeasuredRowsAndTheEndsBeyond) {
  const GemmCorrection c = Table();
  EXPECT_DOUBLE_EQ(c.At(1), 1.2);
  EXPECT_DOUBLE_EQ(c.At(4), 1.2);
  EXPECT_DOUBLE_EQ(c.At(6), 1.1);     // half way from 1.2 to 1.0
  EXPECT_DOUBLE_EQ(c.At(8), 1.0);
  EXPECT_DOUBLE_EQ(c.At(12), 0.95);   // half way from 1.0 to 0.9
  EXPECT_DOUBLE_EQ(c.At(16), 0.9);
  EXPECT_DOUBLE_EQ(c.At(4096), 0.9);
}

TEST(GemmCorrectionTest, LeaveOneOutIsTheNeighboursInterpolation) {
  const GemmCorrection c = Table();
  // 8 measured: from 4 (1.2) and 16 (0.9), a third of the way: 1.1.
  EXPECT_DOUBLE_EQ(c.LeaveOneOut(8), 1.1);
  EXPECT_DOUBLE_EQ(c.LeaveOneOut(4), 1.0);   // an end: the nearest other
  EXPECT_DOUBLE_EQ(c.LeaveOneOut(16), 1.0);
  EXPECT_DOUBLE_EQ(c.LeaveOneOut(12), 0.95);  // not measured: At(12)
}

TEST(GemmCorrectionTest, OfTakesEachRowsMedianAndKeepsWhatPredictsUnseenRows) {
  std::vector<GemmRatio> ratios;
  // qkv_proj [10, 20]: the form 20% fast at every M; three rows at M = 3 (median 1.25).
  for (int64_t m = 1; m <= 6; ++m) ratios.push_back({Op::kQkvProj, 10, 20, m, 1.25});
  ratios.push_back({Op::kQkvProj, 10, 20, 3, 1.5});
  ratios.push_back({Op::kQkvProj, 10, 20, 3, 1.0});
  // o_proj [10, 10]: noise about the form, +-10% by turns. From its neighbours each row
  // is predicted 18-22% off, against 9-11% by the form: dropped.
  for (int64_t m = 1; m <= 6; ++m) ratios.push_back({Op::kOProj, 10, 10, m, m % 2 ? 1.1 : 0.9});
  // down_proj [20, 10]: two row counts, below min_rows: dropped.
  ratios.push_back({Op::kDownProj, 20, 10, 1, 2.0});
  ratios.push_back({Op::kDownProj, 20, 10, 2, 2.0});
  // qkv_proj [10, 30]: another shape of the same op, its own table; 1/3 to 1e-6.
  for (int64_t m = 1; m <= 3; ++m) ratios.push_back({Op::kQkvProj, 10, 30, m, 1.0 / 3.0 * m});

  const std::vector<GemmCorrection> c = GemmCorrectionsOf(ratios, 3);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].op, Op::kQkvProj);
  EXPECT_EQ(c[0].n, 20);
  EXPECT_EQ(c[0].rows, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c[0].factor, (std::vector<double>(6, 1.25)));
  EXPECT_EQ(c[1].n, 30);
  EXPECT_EQ(c[1].factor, (std::vector<double>{0.333333, 0.666667, 1.0}));

  EXPECT_EQ(FindGemmCorrection(c, Op::kQkvProj, 10, 30), &c[1]);
  EXPECT_EQ(FindGemmCorrection(c, Op::kQkvProj, 30, 10), nullptr);
  EXPECT_EQ(FindGemmCorrection(c, Op::kOProj, 10, 10), nullptr);
}

}  // namespace
}  // namespace servelab
