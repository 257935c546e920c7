#pragma once
// The driver's clock, injected (ns-3's Default vs Realtime simulator; LevelDB's Env):
//
//   VirtualClock  an event is handled at its own time, at once. The simulator, and the
//                 engine with `clock: virtual` (each step advances time by its measured
//                 duration, so the schedule is reproducible).
//   WallClock     an event is handled no earlier than its time on a real clock: the
//                 driver waits for it, and when the host has fallen behind (a step took
//                 longer than planned, host overhead between steps) the event is handled
//                 late, at the real time. The engine with `clock: wall`.
//
// Times are ns since Start(). WallClock reads real time through a TimeSource, so tests
// drive it with a fake source instead of sleeping.
#include "core/time.h"

namespace servelab {

class Clock {
 public:
  virtual ~Clock() = default;
  // The run begins: time 0 is now.
  virtual void Start() {}
  // Waits until the event due at `due` may be handled; returns the time it is handled
  // at, >= due.
  virtual TimeNs HandleAt(TimeNs due) = 0;
};

class VirtualClock final : public Clock {
 public:
  TimeNs HandleAt(TimeNs due) override { return due; }
};

// Monotonic real time and sleeping: the process's steady clock, or a fake in tests.
class TimeSource {
 public:
  virtual ~TimeSource() = default;
  virtual TimeNs Now() = 0;  // ns, monotonic, any origin
  virtual void SleepFor(TimeNs duration) = 0;
};

// std::chrono::steady_clock and std::this_thread::sleep_for.
TimeSource& SystemTimeSource();

class WallClock final : public Clock {
 public:
  explicit WallClock(TimeSource& source = SystemTimeSource()) : source_(source) {}
  void Start() override { start_ = source_.Now(); }
  TimeNs HandleAt(TimeNs due) override;

 private:
  TimeNs Elapsed() { return source_.Now() - start_; }

  TimeSource& source_;
  TimeNs start_ = 0;
};

}  // namespace servelab
