#include "kernels/write_kv_cache.h"

#include <cstring>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {

void WriteKvCache(float* k_cache, float* v_cache, const float* k, const float* v,
                  const int64_t* slot_mapping, int32_t num_tokens, const KvCacheShape& cache) {
  SERVELAB_KERNEL_CHECK(cache.Valid());
  SERVELAB_KERNEL_CHECK(num_tokens >= 0);
  const int64_t stride = cache.SlotStride();  // elements per token, in k/v and in a slot
  const int64_t num_slots = cache.NumSlots();
  const size_t row_bytes = static_cast<size_t>(stride) * sizeof(float);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token
    SERVELAB_KERNEL_CHECK_MSG(slot < num_slots, "token %d: slot %lld of %lld", t,
                              static_cast<long long>(slot), static_cast<long long>(num_slots));
    std::memcpy(k_cache + slot * stride, k + t * stride, row_bytes);
    std::memcpy(v_cache + slot * stride, v + t * stride, row_bytes);
  }
}

}  // namespace servelab::kernels::cpu
