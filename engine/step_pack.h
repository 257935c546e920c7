#pragma once
// A StepPlan flattened into the arrays the attention kernels read (kernels/README.md):
// the non-padding seqs' new tokens packed back to back, each with its position and cache
// slot, plus per-seq query offsets, context lengths and block tables. The CPU runner and
// the CUDA runner pack the same way; the CUDA runner uploads these arrays as they are.
#include <cstdint>
#include <vector>

#include <string_view>

#include "core/status.h"
#include "core/step_plan.h"
#include "engine/model_config.h"
#include "engine/token_store.h"

namespace servelab {

struct StepPack {
  std::vector<int32_t> token_ids;        // [T] input id of each new token
  std::vector<int32_t> positions;        // [T] its position in its sequence
  std::vector<int64_t> slot_mapping;     // [T] its KV slot: block * block_size + offset
  std::vector<int32_t> query_start_loc;  // [S + 1] first packed row of each seq
  std::vector<int32_t> context_lens;     // [S] cached tokens after this step
  std::vector<int32_t> block_tables;     // [S, block_table_stride], unused entries 0
  std::vector<int32_t> emit_rows;        // [E] packed row of each emitting seq's last token
  int32_t num_seqs = 0;
  int32_t max_blocks = 0;     // the most blocks one seq's context covers
  int32_t block_table_stride = 0;  // >= max_blocks
  int32_t max_query_len = 0;
  int32_t max_context_len = 0;

  int32_t NumTokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t NumEmitting() const { return static_cast<int32_t>(emit_rows.size()); }
  // Every seq is one new token (a decode, or a one-token chunk): decode attention applies.
  bool AllSingleToken() const { return max_query_len <= 1; }

  // Packs `plan`'s non-padding seqs in plan order, reading input ids from `tokens`. The
  // block table rows are max(max_blocks, min_stride) entries apart. CHECKs that each
  // seq's request has a block table covering its context and the ids the step reads.
  void Build(const StepPlan& plan, const TokenStore& tokens, int32_t block_size,
             int32_t min_stride = 0);
};

// The runners' one guard on what they attend to: a context past the model's sliding
// window (not implemented) is an InvalidArgument naming `runner` ("cpu runner").
Status CheckSlidingWindow(const ModelConfig& config, const StepPack& pack,
                          std::string_view runner);

}  // namespace servelab
