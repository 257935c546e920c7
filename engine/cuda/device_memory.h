#pragma once
// Device and pinned host memory owned for a runner part's lifetime, and the CUDA error
// helpers every part of the CUDA runner shares.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace servelab::engine_cuda {

// `err` as an Internal status ("cuda runner: <what>: <CUDA's message>"). Also clears the
// thread's last error: a handled failure (out of memory, a failed capture) must not
// abort the next kernel launch's check, which peeks at it.
inline Status CudaError(cudaError_t err, const std::string& what) {
  cudaGetLastError();
  return Internal("cuda runner: " + what + ": " + cudaGetErrorString(err));
}

#define SERVELAB_CUDA_RETURN(expr, what)                                              \
  do {                                                                                \
    const cudaError_t servelab_e_ = (expr);                                           \
    if (servelab_e_ != cudaSuccess) return ::servelab::engine_cuda::CudaError(servelab_e_, what); \
  } while (0)

// One allocation: device memory, or pinned host memory (swap pool, staging), which
// asynchronous copies need.
class OwnedMemory {
 public:
  explicit OwnedMemory(bool pinned) : pinned_(pinned) {}
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  OwnedMemory(OwnedMemory&& o) noexcept
      : pinned_(o.pinned_), ptr_(std::exchange(o.ptr_, nullptr)) {}
  ~OwnedMemory() {
    if (ptr_ != nullptr) pinned_ ? cudaFreeHost(ptr_) : cudaFree(ptr_);
  }
  Status Allocate(size_t bytes, const std::string& what) {
    SERVELAB_CHECK(ptr_ == nullptr);
    const size_t n = bytes > 16 ? bytes : 16;
    const cudaError_t err =
        pinned_ ? cudaHostAlloc(&ptr_, n, cudaHostAllocDefault) : cudaMalloc(&ptr_, n);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      return CudaError(err, (pinned_ ? "pinning " : "allocating ") + std::to_string(bytes) +
                                (pinned_ ? " host bytes for " : " bytes for ") + what);
    }
    return Status::Ok();
  }
  void* get() const { return ptr_; }

 private:
  bool pinned_;
  void* ptr_ = nullptr;
};

// The allocations of one part (weights, KV pool, activations), freed with it.
class DeviceArena {
 public:
  // `count` elements of T on the device (or pinned on the host); `what` names them in
  // an out-of-memory message.
  template <typename T>
  Status Alloc(T*& out, int64_t count, const std::string& what, bool pinned = false) {
    OwnedMemory& m = owned_.emplace_back(pinned);
    SERVELAB_RETURN_IF_ERROR(m.Allocate(static_cast<size_t>(count) * sizeof(T), what));
    out = static_cast<T*>(m.get());
    return Status::Ok();
  }
  template <typename T>
  Status AllocPinned(T*& out, int64_t count, const std::string& what) {
    return Alloc(out, count, what, /*pinned=*/true);
  }

 private:
  std::vector<OwnedMemory> owned_;
};

inline int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace servelab::engine_cuda
