#pragma once
// A deterministic event queue: earliest time first; events at equal times leave in the
// order they were pushed (insertion sequence breaks ties), as in ns-3 and SimGrid.
#include <cstdint>
#include <queue>
#include <vector>

#include "core/time.h"

namespace servelab {

template <class Payload>
class EventQueue {
 public:
  struct Event {
    TimeNs time;
    uint64_t seq;
    Payload payload;
  };

  void Push(TimeNs time, Payload payload) { heap_.push(Event{time, next_seq_++, payload}); }
  bool Empty() const { return heap_.empty(); }
  size_t Size() const { return heap_.size(); }
  const Event& Top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace servelab
