#pragma once
// Routing of a mixture-of-experts layer (Mixtral, Qwen2-MoE), the two steps before the
// experts run (vLLM's topk_softmax and moe_align_block_size do the same on a GPU):
//   1. each token's router logits -> softmax over all E experts -> its k most probable
//      experts, optionally renormalised so their weights sum to 1 (Mixtral always does;
//      Qwen2-MoE when norm_topk_prob);
//   2. the token slots grouped by expert, so each expert's rows run as one GEMM.
#include <cstdint>

namespace servelab::kernels::cpu {

//   expert_ids: [num_tokens, k] int32, written: each token's experts, most probable first;
//               equal probabilities go to the lower expert id
//   weights:    [num_tokens, k] f32, written: their softmax probabilities (renormalised
//               over the k when `renormalize`)
//   logits:     [num_tokens, num_experts] f32
// REQUIRES: 1 <= k <= num_experts.
void TopKSoftmaxRouting(int32_t* expert_ids, float* weights, const float* logits,
                        int32_t num_tokens, int32_t num_experts, int32_t k, bool renormalize);

// A counting sort of the num_tokens x k slots by expert. Slot s = token * k + rank.
//   offsets: [num_experts + 1], written: expert e's slots are slots[offsets[e] ..
//            offsets[e + 1]), in increasing slot (so token) order
//   slots:   [num_tokens * k], written
//   expert_ids: as TopKSoftmaxRouting wrote them
void GroupSlotsByExpert(int32_t* offsets, int32_t* slots, const int32_t* expert_ids,
                        int32_t num_tokens, int32_t num_experts, int32_t k);

}  // namespace servelab::kernels::cpu
