#include "kernels/embedding_gather.h"

#include <cstring>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {

void EmbeddingGather(float* out, const float* table, const int32_t* token_ids, int32_t num_tokens,
                     int32_t vocab_size, int32_t hidden) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && vocab_size > 0 && hidden > 0);
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t id = token_ids[t];
    SERVELAB_KERNEL_CHECK_MSG(id >= 0 && id < vocab_size, "token %d: id %d, vocab %d", t, id,
                              vocab_size);
    std::memcpy(out + int64_t{t} * hidden, table + int64_t{id} * hidden, row_bytes);
  }
}

}  // namespace servelab::kernels::cpu
