#include "engine/step_pack.h"

#include <algorithm>
#include <string>

#include "core/status.h"

namespace servelab {

void StepPack::Build(const StepPlan& plan, const TokenStore& tokens, int32_t block_size,
                     int32_t min_stride) {
  SERVELAB_CHECK(block_size >= 1);
  num_seqs = max_blocks = max_query_len = max_context_len = 0;
  for (const ScheduledRequest& s : plan.seqs) {
    if (s.is_padding) continue;
    SERVELAB_CHECK(s.num_new_tokens >= 1 && s.num_computed_tokens >= 0);
    ++num_seqs;
    max_blocks = std::max(max_blocks, (s.ContextLen() + block_size - 1) / block_size);
    max_query_len = std::max(max_query_len, s.num_new_tokens);
    max_context_len = std::max(max_context_len, s.ContextLen());
  }
  block_table_stride = std::max(max_blocks, min_stride);
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start_loc.assign(1, 0);
  context_lens.clear();
  emit_rows.clear();
  block_tables.assign(static_cast<size_t>(num_seqs) * static_cast<size_t>(block_table_stride), 0);
  int32_t seq = 0;
  for (const ScheduledRequest& s : plan.seqs) {
    if (s.is_padding) continue;
    const Request& r = *s.request;
    const int32_t context = s.ContextLen();
    const auto blocks = static_cast<size_t>((context + block_size - 1) / block_size);
    SERVELAB_CHECK_MSG(r.block_table.size() >= blocks,
                       "request " + std::to_string(r.id) + ": block table does not cover " +
                           std::to_string(context) + " tokens");
    const std::span<const int32_t> ids = tokens.Tokens(r.id);
    SERVELAB_CHECK_MSG(ids.size() >= static_cast<size_t>(context),
                       "request " + std::to_string(r.id) + ": " + std::to_string(ids.size()) +
                           " token ids for a context of " + std::to_string(context));
    std::copy(r.block_table.begin(), r.block_table.begin() + static_cast<std::ptrdiff_t>(blocks),
              block_tables.begin() + static_cast<std::ptrdiff_t>(seq) * block_table_stride);
    for (int32_t pos = s.num_computed_tokens; pos < context; ++pos) {
      token_ids.push_back(ids[static_cast<size_t>(pos)]);
      positions.push_back(pos);
      const int64_t block = r.block_table[static_cast<size_t>(pos / block_size)];
      slot_mapping.push_back(block * block_size + pos % block_size);
    }
    query_start_loc.push_back(static_cast<int32_t>(token_ids.size()));
    context_lens.push_back(context);
    if (s.emits_token) emit_rows.push_back(static_cast<int32_t>(token_ids.size()) - 1);
    ++seq;
  }
}

Status CheckSlidingWindow(const ModelConfig& config, const StepPack& pack,
                          std::string_view runner) {
  if (config.sliding_window > 0 && pack.max_context_len > config.sliding_window) {
    return InvalidArgument(std::string(runner) + ": a context of " +
                           std::to_string(pack.max_context_len) +
                           " tokens exceeds the model's sliding_window " +
                           std::to_string(config.sliding_window) + " (not implemented)");
  }
  return Status::Ok();
}

}  // namespace servelab
