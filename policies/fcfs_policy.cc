#include "policies/fcfs_policy.h"

#include "core/status.h"

namespace servelab {

void FcfsPolicy::Enqueue(Request& request, TimeNs /*now*/) {
  if (request.state == RequestState::kPreempted) {
    waiting_.push_front(&request);
  } else {
    waiting_.push_back(&request);
  }
}

Request* FcfsPolicy::Peek(TimeNs /*now*/) { return waiting_.empty() ? nullptr : waiting_.front(); }

void FcfsPolicy::Admitted(Request& request, TimeNs /*now*/) {
  SERVELAB_CHECK(!waiting_.empty() && waiting_.front() == &request);
  waiting_.pop_front();
}

Request* FcfsPolicy::PickVictim(std::span<Request* const> running, TimeNs /*now*/) {
  return running.empty() ? nullptr : running.back();
}

}  // namespace servelab
