// servelab's CUDA prefill attention kernel in the calibrated model: the kernel's grid rule
// (kernels/prefill_grid.h) and its blocks scheduled onto the SMs (sim/paged_prefill_grid.h)
// by hand and against the list-scheduling bounds, the fit recovering a known grid model
// (and the blocks an SM runs) exactly, the model file keeping it, and the cost model pricing
// a step's prefill launch by it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "kernels/prefill_grid.h"
#include "sim/calibrated_cost_model.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"
#include "sim/op_model.h"
#include "sim/paged_prefill_grid.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

OpShape Llama3() {
  OpShape s;
  s.model = *FindModel("llama-3-8b");  // 32 query heads, 8 KV heads: groups of 4
  return s;
}

TEST(PagedPrefillGridTest, TheKernelsRuleByHand) {
  using kernels::PrefillBlockKvTiles;
  using kernels::PrefillTokensPerBlock;
  EXPECT_EQ(PrefillTokensPerBlock(4), 16);  // 64 rows: 16 tokens x 4 heads
  EXPECT_EQ(PrefillTokensPerBlock(1), 64);
  EXPECT_EQ(PrefillTokensPerBlock(64), 1);
  EXPECT_EQ(PrefillTokensPerBlock(65), 0);  // wider than a block: no kernel takes it
  EXPECT_EQ(PrefillTokensPerBlock(0), 0);
  // The grid's z extent: 20 tokens at 16 a block, 2 query tiles; 64 at 64, one.
  EXPECT_EQ(kernels::PrefillQueryTiles(20, 16), 2);
  EXPECT_EQ(kernels::PrefillQueryTiles(64, 64), 1);
  EXPECT_EQ(kernels::PrefillQueryTiles(65, 64), 2);
  EXPECT_EQ(kernels::PrefillQueryTiles(0, 16), 0);
  EXPECT_EQ(kernels::PrefillQueryTiles(20, 0), 0);  // no kernel takes the group
  // A chunk of 64 after 100 cached, 16 tokens a block: the last tile (tokens 48..63) ends
  // at position 163, 3 tiles of 64; the first (0..15) at 115, 2.
  EXPECT_EQ(PrefillBlockKvTiles(100, 64, 3, 16), 3);
  EXPECT_EQ(PrefillBlockKvTiles(100, 64, 0, 16), 2);
  // A short last tile: 20 tokens, the second block takes 16..19, ending at 19: 1 tile.
  EXPECT_EQ(PrefillBlockKvTiles(0, 20, 1, 16), 1);
  EXPECT_EQ(PrefillBlockKvTiles(0, 64, 0, 64), 1);   // positions 0..63
  EXPECT_EQ(PrefillBlockKvTiles(1, 64, 0, 64), 2);   // 1..64
  EXPECT_EQ(PrefillBlockKvTiles(0, 20, 2, 16), 0);   // past the chunk: exits
  EXPECT_EQ(PrefillBlockKvTiles(100, 64, 3, 16, 32), 6);  // the CUDA-core kernel's tiles: 163 / 32 + 1
  // Which kernel: tensor cores for head_dim 64 and 128 (their tile 64, latest first), CUDA
  // cores for the rest (tile 32, earliest first).
  EXPECT_TRUE(kernels::PrefillUsesTensorCores(128, 4));
  EXPECT_FALSE(kernels::PrefillUsesTensorCores(256, 4));
  EXPECT_FALSE(kernels::PrefillUsesTensorCores(128, 65));
  EXPECT_EQ(kernels::PrefillGridOf(64, 8).kv_tile, 64);
  EXPECT_TRUE(kernels::PrefillGridOf(64, 8).latest_first);
  EXPECT_EQ(kernels::PrefillGridOf(256, 8).kv_tile, 32);
  EXPECT_FALSE(kernels::PrefillGridOf(256, 8).latest_first);
}

TEST(PagedPrefillGridTest, BlocksTakeTheSlotThatFreesFirstByHand) {
  // One KV head, groups of 4 (16 tokens a block), a chunk of 64 after 100: blocks of 3, 3,
  // 3, 2 tiles in launch order (latest first). On 2 slots: 3 and 3 at once, then 3 and 2
  // from t = 3: the last ends at 6.
  const std::vector<PrefillChunk> one = {{64, 100}};
  EXPECT_EQ(PagedPrefillMakespanTiles(one, 1, 4, 2), 6);
  EXPECT_EQ(PagedPrefillMakespanTiles(one, 1, 4, 1), 11);  // one slot: every walk in turn
  EXPECT_EQ(PagedPrefillMakespanTiles(one, 1, 4, 4), 3);   // all at once: the longest
  // Latest query tiles first: a chunk of 128 after none gives 2, 2, 2, 2, 1, 1, 1, 1; on 3
  // slots the 2s start first and the last 1s end at 4. Earliest first (the CUDA-core
  // kernel's order, here with 64-position tiles): 1, 1, 1 at 0; 1 at 1; 2, 2 at 1 and 1;
  // 2 at 2, 2 at 3: 5.
  const std::vector<PrefillChunk> ramp = {{128, 0}};
  EXPECT_EQ(PagedPrefillMakespanTiles(ramp, 1, 4, 3), 4);
  EXPECT_EQ(PagedPrefillMakespanTiles(ramp, 1, 4, 3, kernels::PrefillGridRule{64, false}), 5);
  // Earliest first with a chunk that ends early: (20 after 0) and (40 after 70) on 3 slots,
  // 2 KV heads, query tiles 0, 1, 2: 1, 1, 2, 2 | 1, 1, 2, 2 | 2, 2: [1, 1, 2], 2 at 1: [3,
  // 1, 2]; 1 at 1, 1 at 2: [3, 2, 3]; 2 at 2, 2 at 3: [3, 4, 5]; 2 at 3, 2 at 4: 6.
  EXPECT_EQ(PagedPrefillMakespanTiles(std::vector<PrefillChunk>{{20, 0}, {40, 70}}, 2, 4, 3,
                                      kernels::PrefillGridRule{64, false}),
            6);
  // Two sequences, 2 KV heads: (20 new after 0) spans 2 query tiles of 1 tile each, (40
  // after 70) 3 of 2 each. In launch order (query tile 2, 1, 0; sequence; KV head): 2, 2 |
  // 1, 1, 2, 2 | 1, 1, 2, 2. On 3 slots: [2, 2, 0]; then 1 at 0 and 1 at 1: [2, 2, 2];
  // 2, 2: [4, 4, 2]; 1 at 2 and 1 at 3: [4, 4, 4]; 2, 2: 6.
  const std::vector<PrefillChunk> two = {{20, 0}, {40, 70}};
  EXPECT_EQ(PagedPrefillMakespanTiles(two, 2, 4, 3), 6);
  EXPECT_EQ(PagedPrefillMakespanTiles(two, 2, 4, 1), 16);  // 2 x (1 + 1 + 2 + 2 + 2)
  // Nothing to place, no slot, a group no kernel takes: 0.
  EXPECT_EQ(PagedPrefillMakespanTiles({}, 8, 4, 396), 0);
  EXPECT_EQ(PagedPrefillMakespanTiles(one, 1, 4, 0), 0);
  EXPECT_EQ(PagedPrefillMakespanTiles(one, 1, 65, 2), 0);
  EXPECT_EQ(PagedPrefillMakespanTiles(std::vector<PrefillChunk>{{0, 100}}, 1, 4, 2), 0);
}

// Greedy list scheduling (Graham): the last block ends no earlier than the longest walk
// and the walks' sum spread over the slots, and no later than that sum over the slots plus
// the longest walk.
TEST(PagedPrefillGridTest, MakespanKeepsTheListSchedulingBounds) {
  Rng rng(11, 0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PrefillChunk> chunks(static_cast<size_t>(rng.UniformInt(1, 6)));
    for (PrefillChunk& c : chunks) {
      c.new_tokens = rng.UniformInt(1, 3000);
      c.cached = rng.UniformInt(0, 5000);
    }
    const int64_t kv_heads = rng.UniformInt(1, 8);
    const auto group = static_cast<int32_t>(rng.UniformInt(1, 8));
    const int64_t slots = rng.UniformInt(1, 600);
    const kernels::PrefillGridRule rule{rng.UniformInt(0, 1) == 0 ? 32 : 64, rng.UniformInt(0, 1) == 0};
    const int32_t per_block = kernels::PrefillTokensPerBlock(group);
    int64_t total = 0, longest = 0;
    for (const PrefillChunk& c : chunks) {
      for (int64_t t = 0; t * per_block < c.new_tokens; ++t) {
        const int64_t walk = kernels::PrefillBlockKvTiles(c.cached, c.new_tokens, t, per_block, rule.kv_tile);
        total += kv_heads * walk;
        longest = std::max(longest, walk);
      }
    }
    const int64_t span = PagedPrefillMakespanTiles(chunks, kv_heads, group, slots, rule);
    const double spread = static_cast<double>(total) / static_cast<double>(slots);
    EXPECT_GE(span, std::max<double>(static_cast<double>(longest), std::ceil(spread))) << trial;
    EXPECT_LE(span, spread + static_cast<double>(longest)) << trial;
  }
}

TEST(PagedPrefillGridTest, TheLaunchsTokensOnAShape) {
  const OpShape s = Llama3();
  // One chunk of 16 after none: 8 blocks (a KV head each) of one tile. On 1 SM with 3
  // slots: 3 rounds, 3 x 64 tokens; on 132 SMs all at once, one tile.
  const std::vector<PrefillChunk> chunk = {{16, 0}};
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(chunk, s, 1, 3), 3 * 64);
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(chunk, s, 132, 3), 64);
  // Without the blocks an SM runs: the longest sequence's walk, its cached and new tokens.
  const std::vector<PrefillChunk> two = {{16, 0}, {100, 900}};
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(two, s, 132, 0), 1000);
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(two, s, 0, 3), 1000);
  // Tensor parallelism splits the heads, not the group: at TP 8, one KV head a GPU, 4
  // query heads: 1 block of the 16 tokens on 1 slot: 1 tile.
  OpShape tp8 = s;
  tp8.tensor_parallel = 8;
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(chunk, tp8, 1, 1), 64);
  // A group wider than a block (128 query heads on one KV head): no kernel's grid, the
  // longest walk.
  OpShape wide = s;
  wide.model.num_attention_heads = 128;
  wide.model.num_key_value_heads = 1;
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(chunk, wide, 132, 3), 16);
  // head_dim 256 takes the CUDA-core kernel: 32-position tiles. 8 blocks of a chunk of 16
  // after 70 (positions up to 85: 3 tiles of 32, 2 of 64) on 3 slots: 3 rounds, 9 x 32;
  // on the tensor-core kernel (head_dim 128), 6 x 64.
  OpShape big = s;
  big.model.head_dim = 256;
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(std::vector<PrefillChunk>{{16, 70}}, big, 1, 3), 9 * 32);
  EXPECT_DOUBLE_EQ(PagedPrefillGridTokens(std::vector<PrefillChunk>{{16, 70}}, s, 1, 3), 6 * 64);
}

// The prefill grid model the fit is to recover: a fixed cost, per token walked on the
// busiest SM with 3 blocks an SM, and the FLOPs.
OpFit PrefillTruth() {
  OpFit f;
  f.op = Op::kAttentionPrefill;
  f.additive = true;
  f.fixed_us = 8.0;
  f.memory_efficiency = std::numeric_limits<double>::infinity();
  f.compute_efficiency = 0.4;
  f.causal_efficiency = std::numeric_limits<double>::infinity();
  f.per_cta_token_us = 0.1;
  f.resident_ctas = 3;
  return f;
}

// Prefill rows as `servelab profile` measures them on the CUDA engine (no attention
// backend named), timed by `truth`.
ProfileTable Generate(const OpFit& truth) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  const OpShape s = Llama3();
  ProfileTable table;
  table.path = "prefill.csv";
  for (int64_t tokens : {2, 8, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096}) {
    for (int64_t context : {0, 128, 512, 2048}) {
      ProfileRow r;
      r.device = "h200-141gb";
      r.shape = s.model;
      r.tp = 1;
      r.op = "attention_prefill";
      r.tokens = tokens;
      r.batch = 1;
      r.context = context;
      r.median_ms = 1e3 * OpSeconds(truth.On(gpu, s), ProfileRowWork(Op::kAttentionPrefill, r, gpu, {},
                                                                     truth.resident_ctas));
      table.rows.push_back(r);
    }
  }
  return table;
}

TEST(PagedPrefillGridTest, TheFitRecoversAKnownGridModel) {
  const ProfileTable table = Generate(PrefillTruth());
  auto model = FitProfiles({table});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const OpFit& fit = model->ops.at(Op::kAttentionPrefill);
  EXPECT_EQ(fit.resident_ctas, 3);
  EXPECT_NEAR(fit.fixed_us, 8.0, 1e-6);
  EXPECT_NEAR(fit.per_cta_token_us, 0.1, 1e-8);
  auto e = Evaluate(*model, table);
  ASSERT_TRUE(e.ok());
  EXPECT_LT(e->ops.at("attention_prefill").max_error, 1e-6);
  // 2 blocks an SM: the fit finds 2.
  OpFit two = PrefillTruth();
  two.resident_ctas = 2;
  auto other = FitProfiles({Generate(two)});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->ops.at(Op::kAttentionPrefill).resident_ctas, 2);
  // Times of the longest walk alone (no slots waited for): the fit counts none.
  OpFit longest = PrefillTruth();
  longest.resident_ctas = 0;
  auto flat = FitProfiles({Generate(longest)});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->ops.at(Op::kAttentionPrefill).resident_ctas, 0);
  EXPECT_NEAR(flat->ops.at(Op::kAttentionPrefill).per_cta_token_us, 0.1, 1e-8);
  // The model file keeps the count, and no decode-only key.
  const std::string yaml = CalibratedModelYaml(*model, {});
  auto back = testing::ReadModelText(yaml, "prefill_grid");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ops.at(Op::kAttentionPrefill).resident_ctas, 3);
  EXPECT_EQ(back->ops.at(Op::kAttentionPrefill).per_cta_token_us, fit.per_cta_token_us);
  EXPECT_EQ(CalibratedModelYaml(*back, {}), yaml);
  // Rows FlashAttention ran are not given this kernel's grid.
  ProfileTable flash = table;
  for (ProfileRow& r : flash.rows) r.attention_backend = "AttentionBackend.FLASH_ATTENTION";
  auto vidur = FitProfiles({flash});
  ASSERT_TRUE(vidur.ok());
  EXPECT_EQ(vidur->ops.at(Op::kAttentionPrefill).resident_ctas, 0);
}

// The message reading a model file of `ops` on an H200 gives ("" when it reads).
std::string ReadError(const std::string& ops) {
  auto read = testing::ReadModelText("device: h200-141gb\nops:\n" + ops, "prefill_grid_bad");
  return read.ok() ? "" : read.status().message();
}

TEST(PagedPrefillGridTest, PrefillTakesTheCountNotTheReduce) {
  const std::string prefill = "  attention_prefill:\n    form: additive\n    fixed_us: 8\n"
                              "    memory_efficiency: .inf\n    compute_efficiency: 0.4\n"
                              "    per_cta_token_us: 0.1\n";
  EXPECT_EQ(ReadError(prefill), "");  // an older model: the longest walk
  EXPECT_EQ(ReadError(prefill + "    resident_ctas: 3\n"), "");
  EXPECT_THAT(ReadError(prefill + "    resident_ctas: 0\n"), HasSubstr("ops.attention_prefill.resident_ctas"));
  EXPECT_THAT(ReadError(prefill + "    resident_ctas: 3\n    per_partition_us: 1\n"),
              HasSubstr("ops.attention_prefill.per_partition_us: only attention_decode has it"));
}

// Prefill steps on a model with the grid: the launch's walk as its blocks take the SMs.
TEST(PagedPrefillGridTest, TheCostModelPricesAPrefillLaunchByItsGrid) {
  CalibratedModel model = testing::FreeOpsModel("h200-141gb");  // every op free but prefill attention
  OpFit& prefill = model.ops[Op::kAttentionPrefill];
  prefill.additive = true;
  prefill.fixed_us = 8.0;
  prefill.per_cta_token_us = 0.1;
  prefill.resident_ctas = 3;
  DeploymentSpec d;
  d.model = *FindModel("llama-3-8b");
  d.gpu = *FindGpu("h200-141gb");
  d.gpu.sm_count = 1;  // 3 slots: the rounds countable by hand
  Request a, b;
  a.prompt_len = 16;
  b.prompt_len = 48;
  a.target_output_len = b.target_output_len = 10;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&a, 16, 0, true, false});
  const CalibratedCostModel cost(model, "m.yaml", d, 0);
  // 8 blocks of one tile on 3 slots: 3 rounds of 64 tokens. 32 layers.
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * (8 + 3 * 64 * 0.1) * 1e-6, 1e-12);
  // With a chunk of 48 after 0 beside it (3 query tiles of 16, one tile each): 8 + 24
  // blocks of one tile, 32 on 3 slots: 11 rounds.
  plan.seqs.push_back(ScheduledRequest{&b, 48, 0, true, false});
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * (8 + 11 * 64 * 0.1) * 1e-6, 1e-12);
  // A model without the count: the longest walk, 48 tokens.
  CalibratedModel older = model;
  older.ops[Op::kAttentionPrefill].resident_ctas = 0;
  EXPECT_NEAR(CalibratedCostModel(older, "m.yaml", d, 0).OpsSeconds(plan), 32 * (8 + 48 * 0.1) * 1e-6,
              1e-12);
  // With the decode kernel's grid too, a mixed step's leading decode runs on it and only
  // the rest makes the prefill launch: a decode of 1 after 300 cached, then the chunk of
  // 48 (24 blocks of one tile on 3 slots: 8 rounds). Decode on 1 SM with 4 blocks: 301
  // attended over 8 KV heads, partitions of 512 (8 blocks are already 2 an SM), 2 waves
  // of 4 each walking 301: 602 tokens, no reduce.
  CalibratedModel both = model;
  OpFit& decode = both.ops[Op::kAttentionDecode] = testing::DecodeGridTruth();
  decode.memory_efficiency = std::numeric_limits<double>::infinity();  // the grid and fixed terms alone
  decode.per_row_us = 0;
  Request c;
  c.prompt_len = 300;
  c.target_output_len = 10;
  StepPlan mixed;
  mixed.seqs.push_back(ScheduledRequest{&c, 1, 300, true, false});
  mixed.seqs.push_back(ScheduledRequest{&b, 48, 0, true, false});
  const double decode_us = 7 + 602 * 0.08;
  const double prefill_us = 8 + 8 * 64 * 0.1;
  EXPECT_NEAR(CalibratedCostModel(both, "m.yaml", d, 0).OpsSeconds(mixed), 32 * (decode_us + prefill_us) * 1e-6,
              1e-12);
}

}  // namespace
}  // namespace servelab
