#include "core/request.h"

namespace servelab {

std::string_view RequestStateName(RequestState state) {
  switch (state) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kRunning: return "running";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinished: return "finished";
    case RequestState::kRejected: return "rejected";
  }
  return "?";
}

// "" for kNone, so a CSV column of reasons is empty for requests that were not rejected.
std::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone: return "";
    case RejectReason::kExceedsContextWindow: return "exceeds_context_window";
    case RejectReason::kExceedsKvCapacity: return "exceeds_kv_capacity";
    case RejectReason::kExceedsTokenBudget: return "exceeds_token_budget";
  }
  return "?";
}

}  // namespace servelab
