#pragma once
// Test doubles for what the driver is built from: a backend with a fixed step time, its
// own capacity and context, and an optional failure at step k; a real-time source that
// moves only when told to (the wall clock without sleeping).
#include <optional>
#include <vector>

#include "core/backend.h"
#include "driver/clock.h"

namespace servelab {

inline constexpr TimeNs kMs = kNsPerMs;

// Real time that only moves when told to; sleeping moves it.
class FakeTimeSource final : public TimeSource {
 public:
  TimeNs Now() override { return now; }
  void SleepFor(TimeNs duration) override {
    sleeps.push_back(duration);
    now += duration;
  }
  TimeNs now = 1'000'000'000;  // any origin
  std::vector<TimeNs> sleeps;
};

struct FakeBackendOptions {
  KvCapacity capacity{1000, 16, 0, 4096};
  int32_t max_model_len = 2048;
  TimeNs step_time = 10 * kMs;     // what Execute reports
  TimeNs host_time = 0;            // extra real time each step costs, not reported
  int64_t fail_at_step = -1;       // this step (0-based) fails
  StatusCode fail_code = StatusCode::kInternal;  // with an error of this kind
  FakeTimeSource* time = nullptr;  // advanced by step_time + host_time per step
  std::optional<TimeNs> prefill_time;
};

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(const FakeBackendOptions& options) : options_(options) {}
  std::string_view Name() const override { return "fake"; }
  KvCapacity Capacity() const override { return options_.capacity; }
  int32_t MaxModelLen() const override { return options_.max_model_len; }
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    starts.push_back(plan.start);
    if (steps_++ == options_.fail_at_step) {
      return Status(options_.fail_code, options_.fail_code == StatusCode::kInternal ? "device fault" : "bad token");
    }
    if (options_.time != nullptr) options_.time->now += options_.step_time + options_.host_time;
    StepResult result;
    result.elapsed = options_.step_time;
    return result;
  }
  std::optional<TimeNs> PredictPrefillTime(int32_t num_tokens) const override {
    if (!options_.prefill_time) return std::nullopt;
    return *options_.prefill_time * num_tokens;
  }
  std::vector<TimeNs> starts;  // plan.start of every step

 private:
  FakeBackendOptions options_;
  int64_t steps_ = 0;
};

}  // namespace servelab
