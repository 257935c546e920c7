// servelab's own CUDA attention kernels in the calibrated model: the decode kernel's
// partition rule (kernels/decode_partition.h) and its grid's work (sim/paged_decode_grid.h)
// by hand, the fit recovering a known grid model (and the blocks an SM runs) exactly, the
// model file keeping it, and the cost model pricing a mixed step as the engine runs it: its
// leading decode rows on the decode kernel, the rest on the prefill kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "kernels/decode_partition.h"
#include "sim/calibrated_cost_model.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"
#include "sim/op_model.h"
#include "sim/paged_decode_grid.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

OpShape Llama3() {
  OpShape s;
  s.model = *FindModel("llama-3-8b");  // 8 KV heads
  return s;
}

// The kernel's rule: the longest of 512, 256, 128 tokens that gives two blocks an SM
// (264 on 132 SMs), else 128.
TEST(PagedDecodeGridTest, ThePartitionRuleByHand) {
  using kernels::DecodePartitionLen;
  // One sequence of 1,024 over 8 KV heads: 16, 32, 64 blocks; none reaches 264.
  EXPECT_EQ(DecodePartitionLen(1, 8, 1024, 132), 128);
  // Six of 4,096: 512 gives 6 x 8 x 8 = 384.
  EXPECT_EQ(DecodePartitionLen(6, 8, 4096, 132), 512);
  // Three of 4,096: 512 gives 192, 256 gives 384.
  EXPECT_EQ(DecodePartitionLen(3, 8, 4096, 132), 256);
  // Sixteen of 1,024: 512 gives 256 (short of 264), 256 gives 512.
  EXPECT_EQ(DecodePartitionLen(16, 8, 1024, 132), 256);
  EXPECT_EQ(kernels::DecodePartitions(1025, 512), 3);
  EXPECT_EQ(kernels::DecodePartitions(1024, 512), 2);
}

TEST(PagedDecodeGridTest, TheGridsWorkByHand) {
  const OpShape s = Llama3();
  auto grid = [&](std::vector<int64_t> attended, int32_t resident) {
    OpWork w;
    AddPagedDecodeGridWork(w, s, 132, resident, static_cast<int64_t>(attended.size()),
                           [&](int64_t i) { return attended[static_cast<size_t>(i)]; });
    return w;
  };
  // Three of 4,096: partitions of 256, 16 each, 384 blocks in one wave of 528 (4 an SM):
  // each walks 256 tokens; the reduce merges 16.
  OpWork w = grid({4096, 4096, 4096}, 4);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 256);
  EXPECT_DOUBLE_EQ(w.reduce, 1);
  EXPECT_DOUBLE_EQ(w.partitions, 16);
  // 128 of 1,024: partitions of 512 (2,048 blocks), 4 waves of 528: 4 x 512. With 2 an
  // SM, 8 waves (2,048 / 264 = 7.76).
  EXPECT_DOUBLE_EQ(grid(std::vector<int64_t>(128, 1024), 4).cta_tokens, 4 * 512);
  EXPECT_DOUBLE_EQ(grid(std::vector<int64_t>(128, 1024), 2).cta_tokens, 8 * 512);
  // One of 4,000 among 44 of 300: partitions of 512 (45 x 8 x 8 = 2,880 >= 264); blocks
  // 8 x (8 + 44) = 416, one wave; their mean walk 8 x 17,200 / 416 = 330.8 tokens, below
  // the long sequence's 512: 512. The reduce merges its 8.
  w = grid([] {
    std::vector<int64_t> a(44, 300);
    a.insert(a.begin(), 4000);
    return a;
  }(), 4);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 512);
  EXPECT_DOUBLE_EQ(w.partitions, 8);
  // One sequence of 100: one partition of 128, no reduce.
  w = grid({100}, 4);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 100);
  EXPECT_DOUBLE_EQ(w.reduce, 0);
  EXPECT_DOUBLE_EQ(w.partitions, 0);
  // Without the blocks an SM runs (a model fitted elsewhere): nothing.
  w = grid({4096}, 0);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 0);
}

// Decode rows as `servelab profile` measures them on the CUDA engine (no attention
// backend named), timed by `truth`.
ProfileTable Generate(const OpFit& truth) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  const OpShape s = Llama3();
  ProfileTable table;
  table.path = "decode.csv";
  table.rows = testing::H200DecodeRows("attention_decode");
  for (ProfileRow& r : table.rows) {
    r.median_ms = 1e3 * OpSeconds(truth.On(gpu, s), ProfileRowWork(Op::kAttentionDecode, r, gpu, {},
                                                                   truth.resident_ctas));
  }
  return table;
}

TEST(PagedDecodeGridTest, TheFitRecoversAKnownGridModel) {
  const ProfileTable table = Generate(testing::DecodeGridTruth());
  auto model = FitProfiles({table});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const OpFit& fit = model->ops.at(Op::kAttentionDecode);
  EXPECT_EQ(fit.resident_ctas, 4);
  EXPECT_NEAR(fit.fixed_us, 7.0, 1e-6);
  EXPECT_NEAR(fit.per_cta_token_us, 0.08, 1e-8);
  EXPECT_NEAR(fit.reduce_us, 4.0, 1e-6);
  EXPECT_NEAR(fit.per_partition_us, 0.1, 1e-7);
  // The bytes, FLOPs and rows of decode rows are not told apart (K and V bytes and FLOPs
  // both go with the attended tokens, the query's bytes with the rows): the fit may share
  // them out otherwise, predicting the same times.
  auto e = Evaluate(*model, table);
  ASSERT_TRUE(e.ok());
  EXPECT_LT(e->ops.at("attention_decode").max_error, 1e-6);
  // Times of 2 blocks an SM: the fit finds 2.
  OpFit two = testing::DecodeGridTruth();
  two.resident_ctas = 2;
  auto other = FitProfiles({Generate(two)});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->ops.at(Op::kAttentionDecode).resident_ctas, 2);
  // Times with no grid in them (a fixed cost, bytes and rows): the fit counts none.
  OpFit plain = testing::DecodeGridTruth();
  plain.per_cta_token_us = plain.reduce_us = plain.per_partition_us = 0;
  plain.resident_ctas = 0;
  auto flat = FitProfiles({Generate(plain)});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->ops.at(Op::kAttentionDecode).resident_ctas, 0);
  EXPECT_EQ(flat->ops.at(Op::kAttentionDecode).per_cta_token_us, 0);
  // The model file keeps the grid's terms.
  const std::string yaml = CalibratedModelYaml(*model, {});
  EXPECT_THAT(yaml, HasSubstr("    resident_ctas: 4\n"));
  auto back = testing::ReadModelText(yaml, "paged_grid");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ops.at(Op::kAttentionDecode).resident_ctas, 4);
  EXPECT_EQ(back->ops.at(Op::kAttentionDecode).per_cta_token_us, fit.per_cta_token_us);
  EXPECT_EQ(CalibratedModelYaml(*back, {}), yaml);
  // Rows FlashAttention ran are not given this kernel's grid.
  ProfileTable flash = table;
  for (ProfileRow& r : flash.rows) r.attention_backend = "AttentionBackend.FLASH_ATTENTION";
  auto vidur = FitProfiles({flash});
  ASSERT_TRUE(vidur.ok());
  EXPECT_EQ(vidur->ops.at(Op::kAttentionDecode).resident_ctas, 0);
  EXPECT_EQ(vidur->ops.at(Op::kAttentionDecode).per_cta_token_us, 0);
}

// The message reading a model file of `ops` on an H200 gives ("" when it reads).
std::string ReadError(const std::string& ops) {
  auto read = testing::ReadModelText("device: h200-141gb\nops:\n" + ops, "paged_grid_bad");
  return read.ok() ? "" : read.status().message();
}

TEST(PagedDecodeGridTest, GridKeysBelongToAttention) {
  const std::string decode = "  attention_decode:\n    form: additive\n    fixed_us: 7\n"
                             "    memory_efficiency: 1.5\n    compute_efficiency: .inf\n";
  EXPECT_EQ(ReadError(decode + "    per_cta_token_us: 0.08\n    reduce_us: 4\n"
                               "    per_partition_us: 0.1\n    resident_ctas: 4\n"),
            "");
  EXPECT_THAT(ReadError(decode + "    per_cta_token_us: 0.08\n"),
              HasSubstr("ops.attention_decode.resident_ctas: missing"));
  EXPECT_THAT(ReadError(decode + "    per_cta_token_us: 0.08\n    resident_ctas: 9\n"),
              HasSubstr("ops.attention_decode.resident_ctas"));
  EXPECT_THAT(ReadError("  o_proj:\n    form: roofline\n    fixed_us: 1\n    memory_efficiency: 1\n"
                        "    compute_efficiency: 1\n    per_cta_token_us: 1\n"),
              HasSubstr("ops.o_proj.per_cta_token_us: only attention has it"));
  EXPECT_THAT(ReadError("  attention_prefill:\n    form: additive\n    fixed_us: 1\n"
                        "    memory_efficiency: 1\n    compute_efficiency: 1\n    reduce_us: 1\n"),
              HasSubstr("ops.attention_prefill.reduce_us: only attention_decode has it"));
}

// A mixed step of two decodes (300 and 1,000 cached) and a chunk of 100 new tokens: the
// engine attends the decodes with the decode kernel and the chunk with the prefill kernel.
TEST(PagedDecodeGridTest, TheCostModelPricesAMixedStepAsTheEngineRunsIt) {
  CalibratedModel model = testing::FreeOpsModel("h200-141gb");  // every op free but attention
  const double inf = std::numeric_limits<double>::infinity();
  OpFit decode = testing::DecodeGridTruth();
  decode.memory_efficiency = inf;  // terms by hand below: the grid's and fixed
  model.ops[Op::kAttentionDecode] = decode;
  OpFit& prefill = model.ops[Op::kAttentionPrefill];
  prefill.additive = true;
  prefill.fixed_us = 12.0;
  prefill.per_cta_token_us = 0.09;
  DeploymentSpec d;
  d.model = *FindModel("llama-3-8b");
  d.gpu = *FindGpu("h200-141gb");
  Request a, b, c;
  a.prompt_len = 300;
  b.prompt_len = 1000;
  c.prompt_len = 500;
  a.target_output_len = b.target_output_len = c.target_output_len = 10;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&a, 1, 300, true, false});
  plan.seqs.push_back(ScheduledRequest{&b, 1, 1000, true, false});
  plan.seqs.push_back(ScheduledRequest{&c, 100, 0, false, false});
  const CalibratedCostModel cost(model, "m.yaml", d, 0);
  // Decode kernel: 301 and 1,001 attended over 8 KV heads: partitions of 128 (even 128
  // gives 2 x 8 x 8 = 128 < 264 blocks); 8 x (3 + 8) = 88 blocks, one wave, the longest
  // walk 128; the reduce merges 8: 7 + 128 x 0.08 + 4 + 8 x 0.1 + 2 x 0.03 us. Prefill
  // kernel: the chunk's walk of 100: 12 + 100 x 0.09 us. 32 layers.
  const double decode_us = 7 + 128 * 0.08 + 4 + 8 * 0.1 + 2 * 0.03;
  const double prefill_us = 12 + 100 * 0.09;
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * (decode_us + prefill_us) * 1e-6, 1e-12);
  // Padding among the decode rows (a static batch's finished member) costs a decode token
  // at its context, as a running decode there would, on the decode kernel.
  Request held;
  held.prompt_len = 2000;
  held.target_output_len = 1;
  StepPlan padded, running;
  padded.seqs = {plan.seqs[0], ScheduledRequest{&held, 1, 2000, false, true}, plan.seqs[1], plan.seqs[2]};
  running.seqs = {plan.seqs[0], ScheduledRequest{&held, 1, 2000, true, false}, plan.seqs[1], plan.seqs[2]};
  EXPECT_EQ(cost.OpsSeconds(padded), cost.OpsSeconds(running));
  EXPECT_GT(cost.OpsSeconds(padded), cost.OpsSeconds(plan));
  // A decode after the chunk is the prefill kernel's: its walk, 1,001, is the longest.
  StepPlan after;
  after.seqs = {plan.seqs[0], plan.seqs[2], plan.seqs[1]};
  const double decode_a_us = 7 + 128 * 0.08 + 4 + 3 * 0.1 + 0.03;  // 301: 3 partitions of 128
  EXPECT_NEAR(cost.OpsSeconds(after), 32 * (decode_a_us + 12 + 1001 * 0.09) * 1e-6, 1e-12);
  // A model of other kernels (no grid): every row on the prefill kernel, whose walk is the
  // longest sequence's.
  CalibratedModel other = model;
  other.ops[Op::kAttentionDecode].resident_ctas = 0;
  other.ops[Op::kAttentionDecode].per_cta_token_us = 0;
  const CalibratedCostModel plain(other, "m.yaml", d, 0);
  EXPECT_NEAR(plain.OpsSeconds(plan), 32 * (12 + 1001 * 0.09) * 1e-6, 1e-12);
  // The decode steps' own overhead (negative: graphs) applies to decode-only steps, and
  // never takes a step below 0; the others take the step overhead.
  CalibratedModel graphs = model;
  graphs.has_decode_step_overhead = true;
  graphs.decode_step_overhead_us = -20;
  const CalibratedCostModel replayed(graphs, "m.yaml", d, /*step_overhead_ms=*/0.5);
  StepPlan decodes;
  decodes.seqs = {plan.seqs[0], plan.seqs[1]};
  EXPECT_EQ(replayed.StepTime(decodes), FromSeconds(replayed.OpsSeconds(decodes) - 20e-6));
  EXPECT_EQ(replayed.StepTime(plan), FromSeconds(replayed.OpsSeconds(plan) + 0.5e-3));
  graphs.decode_step_overhead_us = -1e6;
  EXPECT_EQ(CalibratedCostModel(graphs, "m.yaml", d, 0.5).StepTime(decodes), 0);
}

}  // namespace
}  // namespace servelab
