#include "core/batch_formation.h"

namespace servelab {
namespace {

class ContinuousBatching final : public BatchFormation {
 public:
  bool Displaces() const override { return true; }
  bool AdmissionOpen(int32_t, bool memory_preempted) const override { return !memory_preempted; }
  bool ChunksAdmissions() const override { return true; }
  bool Leaves(Request&) override { return true; }
  void AddPadding(StepPlan&) override {}
  bool Holds() const override { return false; }
  std::span<Request* const> Release(int32_t) override { return {}; }
};

class StaticBatching final : public BatchFormation {
 public:
  bool Displaces() const override { return false; }
  bool AdmissionOpen(int32_t num_running, bool) const override {
    return num_running == 0 && held_.empty();
  }
  bool ChunksAdmissions() const override { return false; }
  bool Leaves(Request& request) override {
    held_.push_back(Held{&request, 0});
    return false;
  }
  void AddPadding(StepPlan& plan) override {
    for (Held& h : held_) {
      ScheduledRequest& s = plan.seqs.emplace_back();
      s.request = h.request;
      s.num_new_tokens = 1;
      // Its context keeps growing by the token it pretends to decode.
      s.num_computed_tokens = h.request->NumTokens() - 1 + h.steps++;
      s.is_padding = true;
    }
  }
  bool Holds() const override { return !held_.empty(); }
  std::span<Request* const> Release(int32_t num_running) override {
    released_.clear();
    if (num_running > 0) return {};
    for (const Held& h : held_) released_.push_back(h.request);
    held_.clear();
    return released_;
  }

 private:
  struct Held {
    Request* request;
    int32_t steps;  // steps carried as padding so far
  };
  std::vector<Held> held_;
  std::vector<Request*> released_;
};

}  // namespace

std::unique_ptr<BatchFormation> MakeBatchFormation(Batching batching) {
  if (batching == Batching::kStatic) return std::make_unique<StaticBatching>();
  return std::make_unique<ContinuousBatching>();
}

}  // namespace servelab
