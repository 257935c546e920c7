#pragma once
// CUDA test support shared by tests/kernels/cuda_*_test.cc: error checks, a device array
// that poisons and downloads, and the fixture that skips (visibly, with the runtime's
// reason) when no CUDA device is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

#include "kernels/cuda/bf16.h"
#include "kernels/kernel_check.h"

namespace servelab::kernels::testing {

inline void CudaOk(cudaError_t err, const char* what) {
  SERVELAB_KERNEL_CHECK_MSG(err == cudaSuccess, "%s: %s", what, cudaGetErrorString(err));
}

// Waits for the launches and fails on any device error (a trap included).
inline void Sync() { CudaOk(cudaDeviceSynchronize(), "kernel"); }

// Device array of n T, freed on scope exit.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    CudaOk(cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    CudaOk(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }

  T* get() const { return ptr_; }
  // All-ones bytes: NaN as bf16 and f32, -1 as int.
  void Poison() { CudaOk(cudaMemset(ptr_, 0xff, n_ * sizeof(T)), "poison"); }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    CudaOk(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

inline DeviceArray<__nv_bfloat16> UploadBf16(const std::vector<float>& host) {
  return DeviceArray<__nv_bfloat16>(cuda::ToBf16(host));
}
inline std::vector<float> DownloadF32(const DeviceArray<__nv_bfloat16>& device) {
  return cuda::ToF32(device.Download());
}

// Skips every test without a CUDA device; rng_ is seeded from GoogleTest's seed.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) GTEST_SKIP() << "no CUDA device: " << cudaGetErrorString(err);
    if (count == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";
  }
  std::mt19937 rng_{::testing::UnitTest::GetInstance()->random_seed() + 12345u};
};

}  // namespace servelab::kernels::testing
