#include "engine/cuda/device_context.h"

namespace servelab::engine_cuda {

bool DeviceUsable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string("no CUDA device: ") + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
}

DeviceContext::~DeviceContext() {
  if (cublas_ != nullptr) blas_->destroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status DeviceContext::Init(int32_t device) {
  std::string why;
  if (!DeviceUsable(&why)) return Internal("cuda runner: " + why);
  device_ = device;
  SERVELAB_CUDA_RETURN(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  cudaDeviceProp prop{};
  SERVELAB_CUDA_RETURN(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  name_ = prop.name;
  SERVELAB_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  auto blas = LoadCublas();
  if (!blas.ok()) return blas.status();
  blas_ = *blas;
  const cublasStatus_t s = blas_->create(&cublas_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublas_ = nullptr;
    return Internal(std::string("cuda runner: cublasCreate: ") + blas_->status_name(s));
  }
  if (const cublasStatus_t st = blas_->set_stream(cublas_, stream_); st != CUBLAS_STATUS_SUCCESS) {
    return Internal(std::string("cuda runner: cublasSetStream: ") + blas_->status_name(st));
  }
  // Set before any decode graph is captured: without it cuBLAS would allocate its own
  // inside the first capture, where allocating is not allowed.
  constexpr int64_t kCublasWorkspace = int64_t{32} << 20;
  unsigned char* workspace = nullptr;
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(workspace, kCublasWorkspace, "the cuBLAS workspace"));
  if (const cublasStatus_t st = blas_->set_workspace(cublas_, workspace, kCublasWorkspace);
      st != CUBLAS_STATUS_SUCCESS) {
    return Internal(std::string("cuda runner: cublasSetWorkspace: ") + blas_->status_name(st));
  }
  return Status::Ok();
}

}  // namespace servelab::engine_cuda
