#pragma once
// A fixed-capacity map from 64-bit block keys (already well mixed: core/prefix_key.h) to
// block ids, for the prefix caches: open addressing with linear probing and
// backward-shift deletion. It never allocates after construction -- a cache holds at
// most one entry per KV block, so the capacity is known up front -- and its probes touch
// one flat array.
#include <bit>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace servelab {

class BlockKeyTable {
 public:
  // REQUIRES: max_entries >= 0. Load factor stays <= 1/2.
  explicit BlockKeyTable(int32_t max_entries)
      : max_entries_(max_entries),
        slots_(std::bit_ceil(static_cast<uint64_t>(2 * int64_t{max_entries} + 2))),
        shift_(64 - std::countr_zero(slots_.size())) {
    SERVELAB_CHECK(max_entries >= 0);
  }

  int32_t Size() const { return size_; }

  // The block stored under `key`, or -1.
  int32_t Find(uint64_t key) const {
    for (size_t i = Home(key);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.block < 0) return -1;
      if (s.key == key) return s.block;
    }
  }

  // Stores `block` under `key`. False, with nothing changed, when `key` is present.
  // REQUIRES: Size() < max_entries, block >= 0.
  bool Insert(uint64_t key, int32_t block) {
    SERVELAB_CHECK(block >= 0);
    size_t i = Home(key);
    for (; slots_[i].block >= 0; i = Next(i)) {
      if (slots_[i].key == key) return false;
    }
    SERVELAB_CHECK_MSG(size_ < max_entries_, "block key table full");
    slots_[i] = Slot{key, block};
    ++size_;
    return true;
  }

  // Removes `key`. False when absent.
  bool Erase(uint64_t key) {
    size_t hole = Home(key);
    for (;; hole = Next(hole)) {
      if (slots_[hole].block < 0) return false;
      if (slots_[hole].key == key) break;
    }
    // Backward shift: move later entries of the probe run into the hole when their home
    // does not lie cyclically in (hole, j].
    for (size_t j = Next(hole); slots_[j].block >= 0; j = Next(j)) {
      const size_t home = Home(slots_[j].key);
      const bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t block = -1;  // -1: empty
  };
  size_t Home(uint64_t key) const { return static_cast<size_t>(key >> shift_); }
  size_t Next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  int32_t max_entries_;
  int32_t size_ = 0;
  std::vector<Slot> slots_;
  int shift_;
};

}  // namespace servelab
