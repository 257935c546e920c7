#include "core/fairness_tracker.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

// Two clients backlogged through two 10 s windows: served 1:3 in the first (Jain
// 16/20 = 0.8) and 2:2 in the second (Jain 1), so the window average is 0.9 while the
// whole-run services (3 and 5) give Jain 64/68.
TEST(FairnessTrackerTest, WindowJainAveragesOverBackloggedWindows) {
  FairnessTracker t({1.0, 1.0}, /*input_weight=*/0.0, /*output_weight=*/1.0, 10 * kNsPerSec);
  t.Arrive(0, 0);
  t.Arrive(1, 0);
  t.AdvanceTo(1 * kNsPerSec);
  t.Add(0, 0, 1);
  t.Add(1, 0, 3);
  t.AdvanceTo(12 * kNsPerSec);
  t.Add(0, 0, 2);
  t.Add(1, 0, 2);
  t.Finish(20 * kNsPerSec);
  EXPECT_EQ(t.difference_windows(), 2);
  EXPECT_EQ(t.jain_windows(), 2);
  EXPECT_DOUBLE_EQ(t.mean_window_jain(), 0.9);
  const double run[] = {t.Service(0), t.Service(1)};
  EXPECT_DOUBLE_EQ(JainIndex(run), 64.0 / 68.0);
}

TEST(FairnessTrackerTest, WindowsThatServedNobodyDoNotCountForJain) {
  FairnessTracker t({1.0, 1.0}, 1.0, 1.0, 10 * kNsPerSec);
  t.Arrive(0, 0);
  t.Arrive(1, 0);
  t.Finish(30 * kNsPerSec);
  EXPECT_EQ(t.difference_windows(), 3);
  EXPECT_EQ(t.jain_windows(), 0);
  EXPECT_DOUBLE_EQ(t.mean_window_jain(), 1.0);
}

}  // namespace
}  // namespace servelab
