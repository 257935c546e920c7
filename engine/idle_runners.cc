#include "engine/idle_runners.h"

#include <utility>

namespace servelab {

LentRunner::~LentRunner() {
  if (failed_) return;  // destroyed with this
  runner_->SetOpTimer(nullptr);  // the borrower's timer dies with it
  owner_->Return(IdleRunners::Kept{std::move(runner_), requested_});
}

StatusOr<std::unique_ptr<ModelRunner>> IdleRunners::Lend(int64_t num_blocks, const Make& make) {
  std::vector<Kept> dropped;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < idle_.size(); ++i) {
      const Kept& k = idle_[i];
      if (k.requested == num_blocks ||
          (num_blocks > 0 && k.runner->Capacity().num_gpu_blocks == num_blocks)) {
        Kept taken = std::move(idle_[i]);
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        return std::unique_ptr<ModelRunner>(
            new LentRunner(shared_from_this(), std::move(taken.runner), taken.requested));
      }
    }
    dropped = std::exchange(idle_, {});
  }
  dropped.clear();
  auto made = make();
  if (!made.ok()) return made.status();
  return std::unique_ptr<ModelRunner>(
      new LentRunner(shared_from_this(), std::move(made).value(), num_blocks));
}

size_t IdleRunners::NumIdle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

void IdleRunners::Return(Kept kept) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(kept));
}

}  // namespace servelab
