#pragma once
// SERVELAB_HOST_DEVICE marks a function of plain C++ that the kernels call on the device
// and the host code (the CPU twins, the cost model) calls on the host: __host__ __device__
// under nvcc, nothing elsewhere.
#if defined(__CUDACC__)
#define SERVELAB_HOST_DEVICE __host__ __device__
#else
#define SERVELAB_HOST_DEVICE
#endif
