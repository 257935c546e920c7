#pragma once
// FairnessTracker: per-client service as it is delivered, and VTC's service difference
// between backlogged clients over fixed time windows (Sheng et al., "Fairness in Serving
// Large Language Models", OSDI'24: its fairness bound is on |W_f(t1, t2) - W_g(t1, t2)|,
// the service two clients backlogged over [t1, t2) receive in it).
//
// Service is VTC's cost function of the tokens delivered, input_weight x prompt tokens +
// output_weight x output tokens (the tracker counts tokens, exactly, and weighs them when
// asked); a client's weighted service is service / weight.
//
// Service difference. Time is cut into windows [k W, (k + 1) W), k = 0, 1, ... (W =
// window_ns). In a window, client i is BACKLOGGED when it had at least one request in
// the system (arrived, neither finished nor rejected) at every instant of the window:
// the paper's bound holds for clients backlogged over the whole interval, so a client
// that arrives late in a window, or drains and comes back, is left out of that window.
// A window counts when >= 2 clients are backlogged in it; its difference is
//   max_i S_i / w_i  -  min_i S_i / w_i   over its backlogged clients i,
// S_i = service delivered to i within the window. Over the counted windows the tracker
// reports the max and the mean (0 and 0 when none counted). The last, partial window
// [k W, end) counts too. A client that never Arrive()s is never backlogged: a driver
// that does not report arrivals gets no windows.
// Not the same number as the paper's artifact plots, which spread each request's service
// evenly over [first token, finish] and use sliding 60 s windows with a demand cap.
// Under light load a client in the system throughout may still be limited by its own
// demand (one long request decoding), so compare policies on the same workload.
//
// Calls must come in nondecreasing time; one earlier than the current window is
// counted in the current window. Clients are indexes >= 0; the tracker grows to the
// largest seen (weight 1 beyond `weights`).
//
// Cost: Add and Arrive/Depart are O(1) (amortized: a new client index grows the table;
// Add is meant for a run of tokens, e.g. one step's tokens of one client);
// closing a window is O(#clients); a stretch of windows with no event between them is
// skipped in O(#clients), so an idle hour with a 1 ms window costs nothing per window.
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace servelab {

// Jain's fairness index (Σx)² / (n Σx²) over the n values; 1 = all equal, 1/n = one
// value holds everything. 0 for no values; 1 when every value is 0.
double JainIndex(std::span<const double> values);

class FairnessTracker {
 public:
  // REQUIRES: every weight > 0; input_weight, output_weight >= 0. window_ns <= 0 disables
  // the windows (difference 0).
  FairnessTracker(std::vector<double> weights, double input_weight, double output_weight,
                  TimeNs window_ns);

  // A request of `client` entered (Arrive) or left (Depart: finished or rejected) the
  // system at `now`. A Depart with nothing in the system for that client is ignored.
  void Arrive(int32_t client, TimeNs now);
  void Depart(int32_t client, TimeNs now);
  // Closes every window that ends at or before `now`. Call before Add at `now`.
  void AdvanceTo(TimeNs now);
  // Tokens delivered to `client` at the time of the last AdvanceTo.
  void Add(int32_t client, int64_t prompt_tokens, int64_t output_tokens) {
    Client& c = Slot(client);
    c.window_prompt += prompt_tokens;
    c.window_output += output_tokens;
  }
  // Closes the last (partial) window [start, end). Call once, after the last event.
  void Finish(TimeNs end);

  int32_t NumClients() const { return static_cast<int32_t>(clients_.size()); }
  // Service delivered to `client` so far. REQUIRES: 0 <= client < NumClients().
  double Service(int32_t client) const {
    const Client& c = clients_[static_cast<size_t>(client)];
    return Units(c.prompt + c.window_prompt, c.output + c.window_output);
  }
  double Weight(int32_t client) const { return clients_[static_cast<size_t>(client)].weight; }

  int64_t difference_windows() const { return windows_; }
  double max_difference() const { return max_difference_; }
  double mean_difference() const {
    return windows_ > 0 ? difference_sum_ / static_cast<double>(windows_) : 0.0;
  }
  // Jain's index over the backlogged clients' service / weight in each counted window
  // that served anyone, averaged over those windows (1 when none). Unlike Jain over a
  // whole run — where, once every request has finished, each client's service simply
  // equals its demand — this sees how the server split its capacity while clients
  // competed for it.
  double mean_window_jain() const {
    return jain_windows_ > 0 ? jain_sum_ / static_cast<double>(jain_windows_) : 1.0;
  }
  int64_t jain_windows() const { return jain_windows_; }

 private:
  struct Client {
    double weight = 1.0;
    int64_t prompt = 0, output = 0;                // tokens, windows closed so far
    int64_t window_prompt = 0, window_output = 0;  // tokens, current window
    int64_t in_system = 0;      // requests arrived and not yet departed
    TimeNs zero_since = 0;      // when in_system last became 0 (valid while it is 0)
    bool gap = false;           // in_system was 0 for a positive time in this window
  };

  Client& Slot(int32_t client) {
    SERVELAB_CHECK(client >= 0);
    if (static_cast<size_t>(client) >= clients_.size()) Grow(client);
    return clients_[static_cast<size_t>(client)];
  }
  void Grow(int32_t client);
  double Units(int64_t prompt, int64_t output) const {
    return input_weight_ * static_cast<double>(prompt) +
           output_weight_ * static_cast<double>(output);
  }
  // Scores the window [window_start_, end) and clears the per-window state.
  void CloseWindow(TimeNs end);

  std::vector<double> weights_;  // as configured
  double input_weight_, output_weight_;
  std::vector<Client> clients_;
  TimeNs window_ns_;
  TimeNs window_start_ = 0;
  TimeNs window_end_;
  int64_t windows_ = 0;  // windows with >= 2 backlogged clients
  double difference_sum_ = 0;
  double max_difference_ = 0;
  double jain_sum_ = 0;
  int64_t jain_windows_ = 0;
};

}  // namespace servelab
