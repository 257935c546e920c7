// UniformStep: the requests and plan of a step of sequences alike, as a scheduler would
// have made them (hand-counted block tables, prompt lengths, token counts).
#include "core/uniform_step.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(UniformStepTest, ADecodeHasItsPromptBehindIt) {
  const UniformStep step(UniformStepShape{3, 1, 17, true}, 10, 4, 7);
  const StepPlan& plan = step.Plan();
  ASSERT_EQ(plan.seqs.size(), 3u);
  EXPECT_EQ(plan.num_decode_tokens, 3);
  EXPECT_EQ(plan.num_prefill_tokens, 0);
  EXPECT_EQ(plan.num_emitting, 3);
  EXPECT_EQ(plan.NumTokens(), 3);
  // 18 tokens after the step: 5 blocks of 4 each, numbered on from 7.
  int32_t next = 7;
  for (int32_t i = 0; i < 3; ++i) {
    const ScheduledRequest& s = plan.seqs[static_cast<size_t>(i)];
    const Request& r = step.Requests()[static_cast<size_t>(i)];
    EXPECT_EQ(s.request, &r);
    EXPECT_EQ(r.id, 10 + i);
    EXPECT_TRUE(s.IsDecode());
    EXPECT_TRUE(s.emits_token);
    EXPECT_EQ(s.num_computed_tokens, 17);
    EXPECT_EQ(s.ContextLen(), 18);
    EXPECT_EQ(r.prompt_len, 17);
    EXPECT_EQ(r.num_generated, 1);  // the token this step feeds
    EXPECT_EQ(r.NumTokens(), 18);
    EXPECT_EQ(r.target_output_len, 2);
    EXPECT_EQ(r.block_table, (std::vector<int32_t>{next, next + 1, next + 2, next + 3, next + 4}));
    next += 5;
  }
  EXPECT_EQ(step.EndBlock(), 22);
}

TEST(UniformStepTest, AChunkEndsItsPrompt) {
  const UniformStep step(UniformStepShape{2, 9, 8, false}, -2, 16, 0);
  const StepPlan& plan = step.Plan();
  EXPECT_EQ(plan.num_prefill_tokens, 18);
  EXPECT_EQ(plan.num_decode_tokens, 0);
  EXPECT_EQ(plan.num_emitting, 2);
  for (int32_t i = 0; i < 2; ++i) {
    const ScheduledRequest& s = plan.seqs[static_cast<size_t>(i)];
    EXPECT_FALSE(s.IsDecode());
    EXPECT_EQ(s.num_new_tokens, 9);
    EXPECT_EQ(s.request->id, i - 2);
    EXPECT_EQ(s.request->prompt_len, 17);
    EXPECT_EQ(s.request->num_generated, 0);
    EXPECT_EQ(s.request->block_table, (std::vector<int32_t>{2 * i, 2 * i + 1}));  // 17 of 16
  }
  EXPECT_EQ(step.EndBlock(), 4);
}

// Interleaved, block after block: request i's block j is first_block + j x seqs + i; the
// same blocks in all, the same end.
TEST(UniformStepTest, InterleavedBlocksGoBlockAfterBlock) {
  const UniformStepShape shape = DecodesOrChunk(true, 3, 20);  // 21 tokens: 2 blocks of 16
  const UniformStep rows(shape, 0, 16, 10);
  const UniformStep woven(shape, 0, 16, 10, /*interleave_blocks=*/true);
  const std::vector<std::vector<int32_t>> in_rows = {{10, 11}, {12, 13}, {14, 15}};
  const std::vector<std::vector<int32_t>> in_turn = {{10, 13}, {11, 14}, {12, 15}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows.Requests()[i].block_table, in_rows[i]) << i;
    EXPECT_EQ(woven.Requests()[i].block_table, in_turn[i]) << i;
  }
  EXPECT_EQ(rows.EndBlock(), 16);
  EXPECT_EQ(woven.EndBlock(), 16);
}

TEST(UniformStepTest, WithoutABlockSizeThereAreNoBlockTables) {
  const UniformStep step(UniformStepShape{1, 1, 0, true});
  const Request& r = step.Requests()[0];
  EXPECT_TRUE(r.block_table.empty());
  EXPECT_EQ(step.EndBlock(), 0);
  // A decode at context 0 has no prompt behind it: it is a one-token prompt.
  EXPECT_EQ(r.prompt_len, 1);
  EXPECT_EQ(r.num_generated, 0);
  EXPECT_FALSE(step.Plan().seqs[0].IsDecode());
}

TEST(UniformStepTest, DecodesOrChunkNamesTheSequencesAndTheirTokens) {
  const UniformStepShape decodes = DecodesOrChunk(true, 16, 255);
  EXPECT_EQ(decodes.seqs, 16);
  EXPECT_EQ(decodes.chunk, 1);
  EXPECT_EQ(decodes.context, 255);
  EXPECT_TRUE(decodes.decode);
  const UniformStepShape chunk = DecodesOrChunk(false, 128, 0);
  EXPECT_EQ(chunk.seqs, 1);
  EXPECT_EQ(chunk.chunk, 128);
  EXPECT_EQ(chunk.context, 0);
  EXPECT_FALSE(chunk.decode);
}

TEST(UniformStepTest, BlocksPerSequenceRoundsUp) {
  EXPECT_EQ(BlocksPerSequence(UniformStepShape{1, 1, 15, true}, 16), 1);
  EXPECT_EQ(BlocksPerSequence(UniformStepShape{1, 1, 16, true}, 16), 2);
  EXPECT_EQ(BlocksPerSequence(UniformStepShape{4, 128, 0, false}, 16), 8);
  // Past int32_t in the sum, not in the result.
  EXPECT_EQ(BlocksPerSequence(UniformStepShape{1, INT32_MAX, INT32_MAX, false}, 1), int64_t{2} * INT32_MAX);
}

}  // namespace
}  // namespace servelab
