#pragma once
// The CUDA runner's device, stream and cuBLAS handle (with a workspace of its own, so
// cuBLAS allocates nothing inside graph captures). Every part enqueues on this stream.
// cuBLAS itself is opened by Init (cublas_library.h), not linked.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "engine/cuda/cublas_library.h"
#include "engine/cuda/device_memory.h"

namespace servelab::engine_cuda {

// Whether a CUDA device can be used; otherwise `why` says why (no driver, no device).
bool DeviceUsable(std::string* why);

class DeviceContext {
 public:
  DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext();

  // Errors: no usable device, no cuBLAS library, a failed stream or cuBLAS set-up.
  Status Init(int32_t device);

  int32_t Device() const { return device_; }
  const std::string& Name() const { return name_; }
  cudaStream_t Stream() const { return stream_; }
  cublasHandle_t Cublas() const { return cublas_; }
  // REQUIRES: Init() succeeded.
  const CublasLibrary& Blas() const { return *blas_; }

 private:
  int32_t device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  const CublasLibrary* blas_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceArena memory_;  // the cuBLAS workspace
};

}  // namespace servelab::engine_cuda
