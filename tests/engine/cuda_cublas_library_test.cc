// cuBLAS is opened at run time, not linked: the toolkit servelab was built with has it, it
// opens once, and every entry point the CUDA runner calls resolves. No GPU needed: this
// is the loader, not cuBLAS at work (the runner's tests cover that on a device).
#include "engine/cuda/cublas_library.h"

#include <gtest/gtest.h>

namespace servelab::engine_cuda {
namespace {

TEST(CublasLibraryTest, OpensOnceWithEveryEntryPoint) {
  auto first = LoadCublas();
  ASSERT_TRUE(first.ok()) << first.status().message();
  const CublasLibrary& l = **first;
  EXPECT_NE(l.create, nullptr);
  EXPECT_NE(l.destroy, nullptr);
  EXPECT_NE(l.set_stream, nullptr);
  EXPECT_NE(l.set_workspace, nullptr);
  EXPECT_NE(l.gemm_ex, nullptr);
  ASSERT_NE(l.status_name, nullptr);
  EXPECT_STREQ(l.status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  auto second = LoadCublas();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
}

}  // namespace
}  // namespace servelab::engine_cuda
