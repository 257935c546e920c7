#pragma once
// cuBLAS, opened when the first CUDA runner needs it rather than linked into servelab:
// loading libcublas (and the libcublasLt it pulls in) costs ~0.4 s of initialisers before
// main, which every process paid when it was linked, simulator runs and `--help`
// included. The runner calls the few entry points it uses through this table.
#include <cublas_v2.h>

#include "core/status.h"

namespace servelab::engine_cuda {

struct CublasLibrary {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*,
                            cudaDataType, int, const void*, void*, cudaDataType, int,
                            cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;
};

// The process's cuBLAS (the major version servelab was compiled against,
// libcublas.so.<CUBLAS_VER_MAJOR>), opened on the first call and kept; thread-safe. An
// error names the library or the entry point it could not find.
StatusOr<const CublasLibrary*> LoadCublas();

}  // namespace servelab::engine_cuda
