#pragma once
// Token embedding lookup.
#include <cstdint>

namespace servelab::kernels::cpu {

// out[t] = table[token_ids[t]].
//   out:       [num_tokens, hidden], f32, written
//   table:     [vocab_size, hidden], f32
//   token_ids: [num_tokens], int32
// REQUIRES: 0 <= token_ids[t] < vocab_size (CHECKed: an id out of range is a bug upstream).
void EmbeddingGather(float* out, const float* table, const int32_t* token_ids, int32_t num_tokens,
                     int32_t vocab_size, int32_t hidden);

}  // namespace servelab::kernels::cpu
