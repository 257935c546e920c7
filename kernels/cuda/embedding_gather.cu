// EmbeddingGather: one thread block per token copies its table row.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace servelab::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// T is the copy unit: Bf16x8 when hidden % 8 == 0, else bf16. row: units per row.
template <typename T>
__global__ void EmbeddingGatherKernel(T* out, const T* table, const int32_t* token_ids,
                                      int32_t vocab_size, int64_t row) {
  const int64_t t = blockIdx.x;
  const int32_t id = token_ids[t];
  if (id < 0 || id >= vocab_size) __trap();
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) out[t * row + i] = table[id * row + i];
}

}  // namespace

void EmbeddingGather(bf16* out, const bf16* table, const int32_t* token_ids, int32_t num_tokens,
                     int32_t vocab_size, int32_t hidden, cudaStream_t stream) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && vocab_size > 0 && hidden > 0);
  if (num_tokens == 0) return;
  if (hidden % 8 == 0) {
    using V = detail::Bf16x8;
    EmbeddingGatherKernel<V><<<num_tokens, kThreads, 0, stream>>>(
        reinterpret_cast<V*>(out), reinterpret_cast<const V*>(table), token_ids, vocab_size,
        hidden / 8);
  } else {
    EmbeddingGatherKernel<bf16><<<num_tokens, kThreads, 0, stream>>>(out, table, token_ids,
                                                                     vocab_size, hidden);
  }
  SERVELAB_CUDA_LAUNCH_CHECK();
}

}  // namespace servelab::kernels::cuda
