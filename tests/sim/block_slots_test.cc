// BlockSlots (sim/block_slots.h): thread blocks in launch order, each on the slot that frees
// first. By hand, and against a plain simulation of every slot on random grids (rings that
// wrap many times, across 64-bit words of its marks, slots and walks of every size).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "sim/block_slots.h"

namespace servelab {
namespace {

TEST(BlockSlotsTest, ByHand) {
  {
    BlockSlots s(2, 3);  // 3, 3 at once; then 3 and 2 from t = 3
    s.Place(3, 3);
    s.Place(2, 1);
    EXPECT_EQ(s.Makespan(), 6);
  }
  {
    BlockSlots s(4, 5);  // all at once: the longest
    s.Place(5, 1);
    s.Place(1, 3);
    EXPECT_EQ(s.Makespan(), 5);
  }
  {
    BlockSlots s(1, 7);  // one slot: every walk in turn
    for (int w = 1; w <= 7; ++w) s.Place(w, 2);
    EXPECT_EQ(s.Makespan(), 2 * 28);
  }
  {
    BlockSlots s(3, 10);  // a long block holds its slot while short ones cycle the others
    s.Place(10, 1);
    s.Place(1, 20);  // 2 slots, 10 rounds: to t = 10
    s.Place(4, 1);   // at 10 (a short slot, or the long one's): to 14
    EXPECT_EQ(s.Makespan(), 14);
  }
}

// Every slot's free time, the earliest taken (ties: the lowest slot; any tie gives the
// same times).
int64_t Reference(int64_t slots, const std::vector<std::pair<int64_t, int64_t>>& grid) {
  std::vector<int64_t> free(static_cast<size_t>(slots), 0);
  int64_t last = 0;
  for (const auto& [walk, count] : grid) {
    for (int64_t b = 0; b < count; ++b) {
      auto first = std::min_element(free.begin(), free.end());
      *first += walk;
      last = std::max(last, *first);
    }
  }
  return last;
}

TEST(BlockSlotsTest, MatchesEverySlotSimulated) {
  Rng rng(5, 0);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t slots = rng.UniformInt(1, 200);
    const int64_t longest = rng.UniformInt(1, 300);
    std::vector<std::pair<int64_t, int64_t>> grid(static_cast<size_t>(rng.UniformInt(1, 60)));
    for (auto& [walk, count] : grid) {
      walk = rng.UniformInt(1, longest);
      count = rng.UniformInt(1, 40);
    }
    BlockSlots s(slots, longest);
    for (const auto& [walk, count] : grid) s.Place(walk, count);
    EXPECT_EQ(s.Makespan(), Reference(slots, grid)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace servelab
