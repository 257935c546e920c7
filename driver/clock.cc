#include "driver/clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace servelab {
namespace {

class SteadyTimeSource final : public TimeSource {
 public:
  TimeNs Now() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(TimeNs duration) override {
    std::this_thread::sleep_for(std::chrono::nanoseconds(duration));
  }
};

}  // namespace

TimeSource& SystemTimeSource() {
  static SteadyTimeSource* source = new SteadyTimeSource();
  return *source;
}

TimeNs WallClock::HandleAt(TimeNs due) {
  const TimeNs now = Elapsed();
  if (due > now) source_.SleepFor(due - now);
  // Never ahead of the real clock: host overhead makes the next event late.
  return std::max(due, Elapsed());
}

}  // namespace servelab
