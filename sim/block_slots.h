#pragma once
// A GPU kernel's thread blocks as the device's block scheduler runs them: in launch order,
// each to whichever of the SMs' block slots (SMs x the blocks an SM holds at once) frees
// first, greedy list scheduling. The time the last block ends is what bounds a kernel whose
// blocks each walk their tokens one chunk after another (servelab's attention kernels:
// paged_decode_grid.h, paged_prefill_grid.h). Times are in whatever unit the walks are
// given in (tokens, tiles).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace servelab {

class BlockSlots {
 public:
  // `slots` >= 1, all free at time 0; every walk placed is in [1, longest_walk]. Uses this
  // thread's scratch (no allocation once it has grown): one BlockSlots a thread at a time.
  BlockSlots(int64_t slots, int64_t longest_walk) : free_(Counts()), marked_(Marks()) {
    free_.assign(static_cast<size_t>(longest_walk) + 1, 0);
    marked_.assign((free_.size() + 63) / 64, 0);
    Add(0, slots);
  }
  BlockSlots(const BlockSlots&) = delete;
  BlockSlots& operator=(const BlockSlots&) = delete;

  // The next `count` blocks in launch order, each walking `walk`, onto the slots that free
  // first.
  void Place(int64_t walk, int64_t count) {
    const size_t ring = free_.size();
    while (count > 0) {
      if (free_[at_] == 0) {  // on to the next time slots free
        const size_t next = NextMarked(at_);
        now_ += static_cast<int64_t>(next >= at_ ? next - at_ : next + ring - at_);
        at_ = next;
      }
      const int64_t taken = std::min(free_[at_], count);
      if ((free_[at_] -= taken) == 0) marked_[at_ / 64] &= ~(uint64_t{1} << (at_ % 64));
      size_t end = at_ + static_cast<size_t>(walk);
      if (end >= ring) end -= ring;
      Add(end, taken);
      last_end_ = std::max(last_end_, now_ + walk);
      count -= taken;
    }
  }

  // When the last block placed ends.
  int64_t Makespan() const { return last_end_; }

 private:
  void Add(size_t at, int64_t slots) {
    free_[at] += slots;
    marked_[at / 64] |= uint64_t{1} << (at % 64);
  }
  // The first place at or after `from`, round the ring, with slots freeing (there always
  // is one: the slots are all somewhere).
  size_t NextMarked(size_t from) const {
    size_t word = from / 64;
    uint64_t bits = marked_[word] & (~uint64_t{0} << (from % 64));
    for (size_t seen = 0; bits == 0 && seen <= marked_.size(); ++seen) {
      word = word + 1 == marked_.size() ? 0 : word + 1;
      bits = marked_[word];
    }
    return word * 64 + static_cast<size_t>(std::countr_zero(bits));
  }

  // The slots by the time they free, a ring over [now_, now_ + longest_walk]: a block
  // starts at the earliest time a slot frees and walks at most longest_walk, so no slot
  // frees later than that, and none earlier than now_; and a bit a place, set where slots
  // free, to find the next without stepping through the empty ones.
  static std::vector<int64_t>& Counts() {
    thread_local std::vector<int64_t> counts;
    return counts;
  }
  static std::vector<uint64_t>& Marks() {
    thread_local std::vector<uint64_t> marks;
    return marks;
  }

  std::vector<int64_t>& free_;
  std::vector<uint64_t>& marked_;
  int64_t now_ = 0;  // the earliest time a slot frees, or before it
  size_t at_ = 0;    // now_'s place in the ring
  int64_t last_end_ = 0;
};

}  // namespace servelab
