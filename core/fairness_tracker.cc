#include "core/fairness_tracker.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace servelab {

double JainIndex(std::span<const double> values) {
  if (values.empty()) return 0.0;
  double sum = 0, sum_sq = 0;
  for (double x : values) {
    sum += x;
    sum_sq += x * x;
  }
  if (sum_sq == 0) return 1.0;  // all zero: equal shares
  return sum * sum / (static_cast<double>(values.size()) * sum_sq);
}

FairnessTracker::FairnessTracker(std::vector<double> weights, double input_weight,
                                 double output_weight, TimeNs window_ns)
    : weights_(std::move(weights)),
      input_weight_(input_weight),
      output_weight_(output_weight),
      window_ns_(window_ns),
      window_end_(window_ns > 0 ? window_ns : std::numeric_limits<TimeNs>::max()) {
  for (double w : weights_) SERVELAB_CHECK(w > 0);
  SERVELAB_CHECK(input_weight >= 0 && output_weight >= 0);
  if (!weights_.empty()) Grow(static_cast<int32_t>(weights_.size()) - 1);
}

void FairnessTracker::Grow(int32_t client) {
  const size_t old_size = clients_.size();
  clients_.resize(static_cast<size_t>(client) + 1);
  // A new client has had nothing in the system since t = 0 (zero_since = 0).
  for (size_t i = old_size; i < clients_.size(); ++i) {
    clients_[i].weight = i < weights_.size() ? weights_[i] : 1.0;
  }
}

void FairnessTracker::Arrive(int32_t client, TimeNs now) {
  AdvanceTo(now);
  Client& c = Slot(client);
  // Empty over [max(zero_since, window start), now): a gap when that has positive length.
  if (c.in_system == 0 && now > std::max(c.zero_since, window_start_)) c.gap = true;
  ++c.in_system;
}

void FairnessTracker::Depart(int32_t client, TimeNs now) {
  AdvanceTo(now);
  Client& c = Slot(client);
  if (c.in_system == 0) return;  // its arrival was never reported
  if (--c.in_system == 0) c.zero_since = now;
}

void FairnessTracker::AdvanceTo(TimeNs now) {
  if (now < window_end_) return;
  CloseWindow(window_end_);
  // Whole windows before `now` hold no event: every client stays as at window_end_,
  // so each is backlogged exactly when it has a request in the system, and nobody is
  // served (difference 0).
  const int64_t empty = (now - window_end_) / window_ns_;
  if (empty > 0) {
    const auto backlogged = std::count_if(clients_.begin(), clients_.end(),
                                          [](const Client& c) { return c.in_system > 0; });
    if (backlogged >= 2) windows_ += empty;
  }
  window_start_ = window_end_ + empty * window_ns_;
  window_end_ = window_start_ + window_ns_;
}

void FairnessTracker::Finish(TimeNs end) {
  if (window_ns_ <= 0) return;
  AdvanceTo(end);
  if (end > window_start_) CloseWindow(end);
  window_start_ = end;
}

void FairnessTracker::CloseWindow(TimeNs end) {
  int32_t backlogged = 0;
  double lo = 0, hi = 0, sum = 0, sum_squares = 0;
  for (Client& c : clients_) {
    const bool empty_at_end = c.in_system == 0 && c.zero_since < end;
    if (!c.gap && !empty_at_end) {
      const double x = Units(c.window_prompt, c.window_output) / c.weight;
      lo = backlogged == 0 ? x : std::min(lo, x);
      hi = backlogged == 0 ? x : std::max(hi, x);
      sum += x;
      sum_squares += x * x;
      ++backlogged;
    }
    c.prompt += c.window_prompt;
    c.output += c.window_output;
    c.window_prompt = c.window_output = 0;
    c.gap = false;
  }
  if (backlogged < 2) return;
  if (sum > 0) {
    jain_sum_ += sum * sum / (backlogged * sum_squares);
    ++jain_windows_;
  }
  ++windows_;
  difference_sum_ += hi - lo;
  max_difference_ = std::max(max_difference_, hi - lo);
}

}  // namespace servelab
