#include "engine/cuda/cublas_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace servelab::engine_cuda {
namespace {

// dlsym's object pointer as the function pointer `slot` holds.
template <typename Fn>
bool Resolve(void* library, const char* name, Fn& slot) {
  void* symbol = ::dlsym(library, name);
  if (symbol == nullptr) return false;
  slot = reinterpret_cast<Fn>(symbol);
  return true;
}

StatusOr<CublasLibrary> Open() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  // The loader's path first (LD_LIBRARY_PATH, the binary's run path, ld.so.cache), then
  // the toolkit servelab was built with.
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  const std::string built_with = std::string(SERVELAB_CUBLAS_DIR) + "/" + name;
  if (library == nullptr) library = ::dlopen(built_with.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return Internal("cuda runner: cannot open " + name + " (cuBLAS " +
                    std::to_string(CUBLAS_VER_MAJOR) + ") on the loader's path or as " +
                    built_with + ": " + (why != nullptr ? why : "unknown error"));
  }
  CublasLibrary l;
  // cublas_v2.h's names are macros for the _v2 entry points the library exports.
  const std::pair<const char*, bool> found[] = {
      {"cublasCreate_v2", Resolve(library, "cublasCreate_v2", l.create)},
      {"cublasDestroy_v2", Resolve(library, "cublasDestroy_v2", l.destroy)},
      {"cublasSetStream_v2", Resolve(library, "cublasSetStream_v2", l.set_stream)},
      {"cublasSetWorkspace_v2", Resolve(library, "cublasSetWorkspace_v2", l.set_workspace)},
      {"cublasGemmEx", Resolve(library, "cublasGemmEx", l.gemm_ex)},
      {"cublasGetStatusName", Resolve(library, "cublasGetStatusName", l.status_name)},
  };
  for (const auto& [symbol, ok] : found) {
    if (!ok) return Internal("cuda runner: " + name + " has no " + symbol);
  }
  return l;  // the library stays open for the process's life
}

}  // namespace

StatusOr<const CublasLibrary*> LoadCublas() {
  static std::once_flag once;
  static StatusOr<CublasLibrary> library = Internal("cuBLAS not loaded");
  std::call_once(once, [] { library = Open(); });
  if (!library.ok()) return library.status();
  return &*library;
}

}  // namespace servelab::engine_cuda
