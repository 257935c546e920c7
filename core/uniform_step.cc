#include "core/uniform_step.h"

#include <algorithm>

#include "core/status.h"

namespace servelab {

UniformStepShape DecodesOrChunk(bool decode, int32_t tokens, int32_t context) {
  return UniformStepShape{decode ? tokens : 1, decode ? 1 : tokens, context, decode};
}

int64_t BlocksPerSequence(const UniformStepShape& shape, int32_t block_size) {
  SERVELAB_CHECK(block_size >= 1);
  return (int64_t{shape.context} + shape.chunk + block_size - 1) / block_size;
}

UniformStep::UniformStep(const UniformStepShape& shape, int64_t first_id, int32_t block_size,
                         int32_t first_block, bool interleave_blocks)
    : end_block_(first_block) {
  SERVELAB_CHECK(shape.seqs >= 1 && shape.chunk >= 1 && shape.context >= 0);
  SERVELAB_CHECK(!shape.decode || shape.chunk == 1);
  SERVELAB_CHECK(block_size >= 0 && first_block >= 0);
  SERVELAB_CHECK(int64_t{shape.seqs} * shape.chunk <= INT32_MAX);
  SERVELAB_CHECK(int64_t{shape.context} + shape.chunk <= INT32_MAX);
  const int64_t blocks = block_size > 0 ? BlocksPerSequence(shape, block_size) : 0;
  SERVELAB_CHECK(first_block + blocks * shape.seqs <= INT32_MAX);
  requests_.resize(static_cast<size_t>(shape.seqs));
  plan_.seqs.reserve(requests_.size());
  for (int32_t i = 0; i < shape.seqs; ++i) {
    Request& r = requests_[static_cast<size_t>(i)];
    r.id = first_id + i;
    r.prompt_len = shape.decode ? std::max(1, shape.context) : shape.context + shape.chunk;
    r.num_generated = shape.context + shape.chunk - r.prompt_len;
    if (r.num_generated < 0) r.num_generated = 0;  // a decode at context 0
    // One more token than it has: the one this step samples.
    r.target_output_len = r.num_generated + 1;
    r.num_computed_tokens = shape.context;
    for (int64_t b = 0; b < blocks; ++b) {
      r.block_table.push_back(static_cast<int32_t>(
          interleave_blocks ? first_block + b * shape.seqs + i : first_block + i * blocks + b));
    }
    plan_.seqs.push_back(ScheduledRequest{&r, shape.chunk, shape.context, true, false});
  }
  end_block_ = static_cast<int32_t>(first_block + blocks * shape.seqs);
  plan_.num_emitting = shape.seqs;
  if (shape.decode) {
    plan_.num_decode_tokens = shape.seqs;
  } else {
    plan_.num_prefill_tokens = shape.seqs * shape.chunk;
  }
}

}  // namespace servelab
