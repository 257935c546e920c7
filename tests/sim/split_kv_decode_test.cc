// FlashAttention-2's split-KV decode grid (sim/op_model.h): the heuristic's split counts
// by hand, the grid's work for uniform and mixed batches by hand, the fit recovering a
// known split_kv model exactly, and the calibrated cost model counting a batch's grid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "core/params.h"
#include "core/rng.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/calibrated_cost_model.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"
#include "sim/op_model.h"
#include "sim/split_kv_grid.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

// Each case worked through flash-attn's rule: no split once the CTAs fill 80% of the
// SMs; else, among the eligible split counts (those that change the blocks a split
// covers), the fewest whose last-wave efficiency is within 85% of the best.
TEST(SplitKvDecodeTest, TheHeuristicsSplitCountsByHand) {
  // 4 CTAs (one sequence, 4 KV heads), 32 blocks: eligible 1-8, 11, 16, 32; all fit one
  // wave of 108 except 32 (128 CTAs: 1.19 waves, 0.59). Best 16 x 4 / 108 = 0.593, and
  // nothing below 16 reaches 0.85 of it (8: 0.296, 11: 0.407).
  EXPECT_EQ(FlashDecodeSplits(4, 108, 32), 16);
  // 44 CTAs: 7 splits are 308 CTAs, 2.85 waves, 0.951, the best; 0.85 of it is 0.808,
  // which 2 splits (88 CTAs, 0.815) already reach.
  EXPECT_EQ(FlashDecodeSplits(44, 108, 32), 2);
  // 28 CTAs (7 sequences): eligible 1-8, 11, 16, 32; 11 splits are 308 CTAs, 2.85
  // waves, 0.951, the best; 0.85 of it is 0.808: 1-6 splits reach at most 0.778 (3 and
  // 6), 7 splits 196 CTAs = 1.81 waves, 0.907.
  EXPECT_EQ(FlashDecodeSplits(28, 108, 32), 7);
  // 88 CTAs >= 0.8 x 108 = 86.4: one split.
  EXPECT_EQ(FlashDecodeSplits(88, 108, 32), 1);
  // One block: nothing to split.
  EXPECT_EQ(FlashDecodeSplits(4, 108, 1), 1);
}

// An SM's waves from its CTAs' runs, by hand, and against each CTA's blocks listed out
// on random runs.
TEST(SplitKvDecodeTest, WavesFromRunsOfCtas) {
  CtaRuns ctas;
  for (auto [blocks, count] : std::vector<std::pair<int64_t, int64_t>>{{3, 1}, {5, 1}, {2, 3}, {7, 1}}) {
    ctas.Add(blocks, count);
  }
  // 3 5 | 2 2 | 2 7: the first wave's pair 3 blocks and 2 alone; then 2 and 7.
  WaveBlocks w = WaveBlocks::Of(ctas);
  EXPECT_EQ(w.waves, 3);
  EXPECT_EQ(w.pair_blocks, 3);
  EXPECT_EQ(w.single_blocks, 2 + 2 + 7);
  Rng rng(11, 0);
  for (int trial = 0; trial < 200; ++trial) {
    CtaRuns random;
    const int64_t runs = rng.UniformInt(0, 6);
    for (int64_t r = 0; r < runs; ++r) random.Add(rng.UniformInt(1, 9), rng.UniformInt(0, 7));
    const std::vector<int64_t> each = random.Expanded();
    const auto n = static_cast<int64_t>(each.size());
    WaveBlocks want;
    want.waves = (n + 1) / 2;
    if (n >= 2) {
      want.pair_blocks = std::min(each[0], each[1]);
      want.single_blocks = std::max(each[0], each[1]) - want.pair_blocks;
    } else if (n == 1) {
      want.single_blocks = each[0];
    }
    for (int64_t wave = 1; wave < want.waves; ++wave) {
      want.single_blocks += *std::max_element(each.begin() + 2 * wave, each.begin() + std::min(n, 2 * wave + 2));
    }
    w = WaveBlocks::Of(random);
    EXPECT_EQ(w.waves, want.waves) << trial;
    EXPECT_EQ(w.pair_blocks, want.pair_blocks) << trial;
    EXPECT_EQ(w.single_blocks, want.single_blocks) << trial;
  }
  // 2^33 CTAs of one block, one run: the busiest of 108 SMs gets 2 in the launch and
  // ceil((2^33 - 216) / 108) in turn, held as one run, not 80 million entries.
  const int64_t launched = int64_t{1} << 33;
  const CtaRuns huge = BusiestSmCtaBlocks(
      108, launched, [](int64_t) -> int64_t { return 1; }, [&](int64_t c) { return launched - c; });
  EXPECT_EQ(huge.size(), 79536432u);
  EXPECT_EQ(huge.runs.size(), 1u);
}

// The block scheduler as modelled (op_model.h), on small grids worked by hand: how many
// busy CTAs the busiest SM gets (1 block each), then a grid of CTAs of different lengths.
TEST(SplitKvDecodeTest, TheDispatchByHand) {
  // 200 CTAs on 108 SMs, every fifth busy (10 sequences x 4 KV heads split 5 ways, each
  // reaching its first split): the launch puts CTA i on SM i for i < 108 (busy on SMs 0,
  // 5, ..., 105) and CTA 108 + i on SM i (busy 110, ..., 195 on SMs 2, 7, ..., 87): no SM
  // has two.
  // A busy CTA of one block.
  auto one_block_if = [](auto busy) {
    return [busy](int64_t c) -> int64_t { return busy(c) ? 1 : 0; };
  };
  EXPECT_EQ(BusiestSmCtaBlocks(108, 200, one_block_if([](int64_t c) { return c % 5 == 0; })).size(),
            1u);
  // 192 CTAs, every third busy (16 x 4 split 3 ways): the second round's busy CTAs 108,
  // 111, ..., 189 land on SMs 0, 3, ..., 81, beside the first round's.
  EXPECT_EQ(BusiestSmCtaBlocks(108, 192, one_block_if([](int64_t c) { return c % 3 == 0; })).size(),
            2u);
  // 4 SMs, 12 CTAs, busy 0, 9, 10: the launch places 0-3 and 4-7 (only SM 0 keeps one);
  // the idle ones exit and the freed slots fill SM by SM: SM 0's one slot takes 8, SM 1's
  // two take 9 and 10 (both busy), SM 2 takes 11. Filling one slot a SM at a time would
  // have put 9 and 10 on SMs 1 and 2.
  EXPECT_EQ(
      BusiestSmCtaBlocks(4, 12, one_block_if([](int64_t c) { return c == 0 || c == 9 || c == 10; }))
          .size(),
      2u);
  // 3 SMs, CTA 4 alone idle among 10: the launch gives SMs 0 and 2 two busy CTAs, SM 1 one
  // (and idle 4); SM 1's freed slot takes busy 6; every slot then holds a busy CTA, and
  // the last three (7, 8, 9) level the SMs as slots free: one more each.
  EXPECT_EQ(BusiestSmCtaBlocks(3, 10, one_block_if([](int64_t c) { return c != 4; })).size(), 3u);
  // All busy: the CTAs spread evenly, ceil(7 / 2).
  EXPECT_EQ(BusiestSmCtaBlocks(2, 7, [](int64_t) -> int64_t { return 1; }).size(), 4u);
  // Nothing launched, or no SMs: nothing given.
  EXPECT_EQ(BusiestSmCtaBlocks(108, 0, [](int64_t) -> int64_t { return 1; }).size(), 0u);
  EXPECT_EQ(BusiestSmCtaBlocks(0, 5, [](int64_t) -> int64_t { return 1; }).size(), 0u);
  // CTAs of different lengths. 3 SMs, blocks 5, 1, 1, 1, 1, 1: the launch gives every SM
  // two; the busiest is the one given the most blocks, SM 0 (CTAs 0 and 3).
  const int64_t six[] = {5, 1, 1, 1, 1, 1};
  EXPECT_EQ(BusiestSmCtaBlocks(3, 6, [&](int64_t c) { return six[c]; }).Expanded(),
            (std::vector<int64_t>{5, 1}));
  // 2 SMs, blocks 4, 1, 4, 1, 1, 1: the launch gives SM 0 CTAs 0 and 2 (8 blocks), SM 1
  // CTAs 1 and 3 (2); CTA 4 starts where a slot frees first, SM 1 (2 < 8 blocks), and so
  // does CTA 5 (3 < 8): SM 1 gets four CTAs of one block. Levelling by CTAs would have
  // given each SM a third.
  const int64_t levelled[] = {4, 1, 4, 1, 1, 1};
  EXPECT_EQ(BusiestSmCtaBlocks(2, 6, [&](int64_t c) { return levelled[c]; }).Expanded(),
            (std::vector<int64_t>{1, 1, 1, 1}));
  // More than 4 CTAs a SM: the rest go round the SMs in turn. 2 SMs, 10 CTAs of blocks 1,
  // 1, 1, 1, then 4, 1, 4, 1, 4, 1: CTAs 4, 6, 8 to SM 0, 5, 7, 9 to SM 1; five each, SM 0
  // with more blocks. (Where a slot frees first, CTA 6 would have gone to SM 1.)
  const int64_t in_turn[] = {1, 1, 1, 1, 4, 1, 4, 1, 4, 1};
  EXPECT_EQ(BusiestSmCtaBlocks(2, 10, [&](int64_t c) { return in_turn[c]; }).Expanded(),
            (std::vector<int64_t>{1, 1, 4, 4, 4}));
}

// Placing a run of CTAs with the same blocks at once gives what placing them one by one
// gives, on grids of random runs (idle ones among them), in both regimes (slots freeing
// first, and in turn past 4 CTAs a SM).
TEST(SplitKvDecodeTest, RunsPlaceAsTheirCtasDo) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t sms = std::uniform_int_distribution<int32_t>(1, 12)(random);
    std::vector<int64_t> run_start, run_blocks;
    int64_t launched = 0;
    const int64_t runs = std::uniform_int_distribution<int64_t>(1, 40)(random);
    for (int64_t r = 0; r < runs; ++r) {
      run_start.push_back(launched);
      run_blocks.push_back(std::uniform_int_distribution<int64_t>(-1, 6)(random));
      launched += std::uniform_int_distribution<int64_t>(1, 30)(random);
    }
    auto run_of = [&](int64_t cta) {
      return static_cast<size_t>(std::upper_bound(run_start.begin(), run_start.end(), cta) -
                                 run_start.begin() - 1);
    };
    auto blocks = [&](int64_t cta) { return std::max<int64_t>(0, run_blocks[run_of(cta)]); };
    auto run_length = [&](int64_t cta) {
      const size_t r = run_of(cta);
      return (r + 1 < run_start.size() ? run_start[r + 1] : launched) - cta;
    };
    EXPECT_EQ(BusiestSmCtaBlocks(sms, launched, blocks, run_length),
              BusiestSmCtaBlocks(sms, launched, blocks))
        << "trial " << trial << ": " << sms << " SMs, " << launched << " CTAs";
  }
}

OpShape Llama70bTp2() {
  OpShape s;
  s.model = *FindModel("llama-2-70b");  // 64 query heads, 8 KV heads, head_dim 128
  s.tensor_parallel = 2;               // 4 KV heads a GPU
  return s;
}

TEST(SplitKvDecodeTest, TheGridsWorkByHand) {
  const OpShape s = Llama70bTp2();
  const double token_bytes = 2 * 128 * 2;  // K and V of one KV head, bf16
  {
    // 22 sequences of 33 tokens, the KV split over 4,096 (32 blocks): 88 CTAs, no split;
    // 88 busy CTAs are one wave of at most one a SM: a single wave of one block each.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 22, [](int64_t) { return int64_t{33}; });
    EXPECT_EQ(w.single_bytes, 128 * token_bytes);
    EXPECT_EQ(w.pair_bytes, 0);
    EXPECT_EQ(w.waves, 1);
    EXPECT_EQ(w.combine, 0);
    EXPECT_EQ(w.combine_splits, 0);
  }
  {
    // 11 sequences of 1,985 tokens (16 blocks): 44 CTAs a split, 2 splits of 16 blocks;
    // both reach into every sequence: 88 busy CTAs, one wave of one a SM, 16 blocks.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 11, [](int64_t) { return int64_t{1985}; });
    EXPECT_EQ(w.single_bytes, 16 * 128 * token_bytes);
    EXPECT_EQ(w.waves, 1);
    EXPECT_EQ(w.combine, 1);
    EXPECT_EQ(w.combine_splits, 2);
  }
  {
    // 30 sequences of 1,000 tokens split over 4,096: 120 CTAs, no split, 8 blocks each;
    // 120 > 108 busy CTAs: one wave, two a SM on some.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 30, [](int64_t) { return int64_t{1000}; });
    EXPECT_EQ(w.pair_bytes, 8 * 128 * token_bytes);
    EXPECT_EQ(w.cta_bytes_per_token, token_bytes);
    EXPECT_EQ(w.single_bytes, 0);
    EXPECT_EQ(w.waves, 1);
  }
  {
    // 30 sequences split over 4,096 (120 CTAs, no split), the first of 1,000 tokens (8
    // blocks), the rest of 100 (1): the launch's second round puts CTAs 108-119 (1 block)
    // beside CTAs 0-11; the busiest SM is one of the first sequence's, SM 0 with 8 and 1
    // blocks: the two run together for one block, then the longer alone for 7.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 30, [](int64_t i) { return int64_t{i == 0 ? 1000 : 100}; });
    EXPECT_EQ(w.pair_bytes, 128 * token_bytes);
    EXPECT_EQ(w.single_bytes, 7 * 128 * token_bytes);
    EXPECT_EQ(w.waves, 1);
  }
  {
    // 60 sequences of 1,000 tokens: 240 CTAs, at most 3 a SM: a first wave of two a SM,
    // then a second whose CTAs start as slots free, costing one CTA at the single rate.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 60, [](int64_t) { return int64_t{1000}; });
    EXPECT_EQ(w.pair_bytes, 8 * 128 * token_bytes);
    EXPECT_EQ(w.single_bytes, 8 * 128 * token_bytes);
    EXPECT_EQ(w.waves, 2);
  }
  {
    // 100 of them: 400 CTAs, at most 4 a SM: two waves, the second paired on every SM
    // but still staggered: one CTA at the single rate, as for 240.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 100, [](int64_t) { return int64_t{1000}; });
    EXPECT_EQ(w.pair_bytes, 8 * 128 * token_bytes);
    EXPECT_EQ(w.single_bytes, 8 * 128 * token_bytes);
    EXPECT_EQ(w.waves, 2);
  }
  {
    // 16 sequences of 100 tokens split over 4,096: 64 CTAs a split; 3 splits (192 CTAs,
    // 0.889; 0.85 of the best, 32 splits' 0.998, is 0.848, which 2 (0.593) misses) of 11
    // blocks. Each sequence reaches only its first: busy CTAs 0, 3, ..., 189, whose
    // second round shares the first's SMs (TheDispatchByHand): a paired wave of one block.
    OpWork w;
    AddSplitKvWork(w, s, 108, 4096, 16, [](int64_t) { return int64_t{100}; });
    EXPECT_EQ(w.pair_bytes, 128 * token_bytes);
    EXPECT_EQ(w.single_bytes, 0);
    EXPECT_EQ(w.waves, 1);
    EXPECT_EQ(w.combine, 1);
    EXPECT_EQ(w.combine_splits, 3);
    // 10 of them: 40 CTAs a split, 5 splits (200 CTAs, 0.926; 2-4 splits reach at most
    // 0.741), busy 0, 5, ..., 195: no SM gets two, a wave at the single rate.
    OpWork ten;
    AddSplitKvWork(ten, s, 108, 4096, 10, [](int64_t) { return int64_t{100}; });
    EXPECT_EQ(ten.pair_bytes, 0);
    EXPECT_EQ(ten.single_bytes, 128 * token_bytes);
    EXPECT_EQ(ten.waves, 1);
    EXPECT_EQ(ten.combine_splits, 5);
  }
  {
    // A mixed batch split over its longest sequence (1,000 tokens: 8 blocks): 12 CTAs
    // a split; eligible 1, 2, 3, 4, 8, and 8 splits (96 CTAs, 0.889) are the best and
    // the first within 85%. One block a split: the sequences reach 1, 3 and 8 splits,
    // 12 x 4 = 48 busy CTAs, one wave of one a SM, one block each.
    const int64_t attended[] = {100, 300, 1000};
    OpWork w;
    AddSplitKvWork(w, s, 108, 0, 3, [&](int64_t i) { return attended[i]; });
    EXPECT_EQ(w.single_bytes, 128 * token_bytes);
    EXPECT_EQ(w.waves, 1);
    EXPECT_EQ(w.combine, 1);
    EXPECT_EQ(w.combine_splits, 8);
  }
}

// A paired CTA's first pair_ramp_tokens at their own rate, the rest at the paired one;
// nothing else changes.
TEST(SplitKvDecodeTest, ThePairedRampByHand) {
  OpCoefficients c;
  c.additive = true;
  c.s_per_pair_byte = 1e-12;
  c.s_per_cta_byte = 2e-12;
  c.pair_ramp_tokens = 256;
  c.s_per_pair_ramp_byte = 3e-12;
  OpWork w;
  w.cta_bytes_per_token = 512;
  w.pair_bytes = 8 * 128 * 512;  // a paired wave of 8 blocks: its first 256 tokens ramp
  w.single_bytes = 8 * 128 * 512;
  EXPECT_DOUBLE_EQ(OpSeconds(c, w),
                   256 * 512 * 3e-12 + (1024 - 256) * 512 * 1e-12 + 1024 * 512 * 2e-12);
  w.pair_bytes = 128 * 512;  // shorter than the ramp: all of it at the ramp's rate
  EXPECT_DOUBLE_EQ(OpSeconds(c, w), 128 * 512 * 3e-12 + 1024 * 512 * 2e-12);
  w.pair_bytes = 0;  // no paired wave: the single waves as before
  EXPECT_DOUBLE_EQ(OpSeconds(c, w), 1024 * 512 * 2e-12);
  c.pair_ramp_tokens = 0;  // no ramp: every paired byte at the paired rate
  w.pair_bytes = 8 * 128 * 512;
  EXPECT_DOUBLE_EQ(OpSeconds(c, w), 1024 * 512 * 1e-12 + 1024 * 512 * 2e-12);
}

OpFit SplitTruth() {
  OpFit f;
  f.op = Op::kAttentionDecode;
  f.additive = true;
  f.split_kv = true;
  f.fixed_us = 1.0;
  f.memory_efficiency = 1.25;
  f.compute_efficiency = std::numeric_limits<double>::infinity();
  f.cta_memory_efficiency = 1.5;
  f.pair_memory_efficiency = 2.0;
  f.wave_us = 5.0;
  f.combine_us = 6.0;
  f.combine_per_split_us = 0.5;
  f.per_row_us = 0.2;  // a sequence's query, output and block table
  return f;
}

// Decode rows as Vidur's attention profile lays them out (batch 1..128, contexts to
// 2,048, a KV cache allocated for 4,096 tokens), timed by a known split_kv model.
ProfileTable Generate(const OpFit& truth) {
  const GpuSpec gpu = *FindGpu("a100-80gb");
  const OpShape s = Llama70bTp2();
  ProfileTable table;
  table.path = "decode.csv";
  for (int64_t batch = 1; batch <= 128; batch += 3) {
    for (int64_t context = 32; context <= 2048; context += 96) {
      ProfileRow r;
      r.device = "a100-80gb";
      r.shape = s.model;
      r.tp = 2;
      r.op = "attention_decode";
      r.tokens = r.batch = batch;
      r.context = context;
      r.kv_capacity = 4096;
      r.attention_backend = "AttentionBackend.FLASH_ATTENTION";
      r.median_ms = 1e3 * OpSeconds(truth.On(gpu, s), ProfileRowWork(Op::kAttentionDecode, r, gpu));
      table.rows.push_back(r);
    }
  }
  return table;
}

TEST(SplitKvDecodeTest, TheFitRecoversAKnownSplitKvModel) {
  const OpFit truth = SplitTruth();
  const ProfileTable table = Generate(truth);
  auto model = FitProfiles({table});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const OpFit& fit = model->ops.at(Op::kAttentionDecode);
  EXPECT_EQ(fit.FormName(), "split_kv");
  EXPECT_NEAR(fit.fixed_us, 1.0, 1e-6);
  EXPECT_NEAR(fit.memory_efficiency, 1.25, 1e-7);
  EXPECT_NEAR(fit.cta_memory_efficiency, 1.5, 1e-7);
  EXPECT_NEAR(fit.pair_memory_efficiency, 2.0, 1e-7);
  EXPECT_NEAR(fit.wave_us, 5.0, 1e-6);
  EXPECT_NEAR(fit.combine_us, 6.0, 1e-6);
  EXPECT_NEAR(fit.combine_per_split_us, 0.5, 1e-7);
  EXPECT_NEAR(fit.per_row_us, 0.2, 1e-7);
  EXPECT_EQ(fit.pair_ramp_tokens, 0);  // times without a ramp get none
  auto e = Evaluate(*model, table);
  ASSERT_TRUE(e.ok());
  EXPECT_LT(e->ops.at("attention_decode").max_error, 1e-6);
  // The model file keeps the form and its coefficients.
  auto back = testing::ReadModelText(CalibratedModelYaml(*model, {}), "split_kv");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const OpFit& b = back->ops.at(Op::kAttentionDecode);
  EXPECT_TRUE(b.split_kv && b.additive);
  EXPECT_EQ(b.pair_memory_efficiency, fit.pair_memory_efficiency);
  EXPECT_EQ(b.combine_us, fit.combine_us);
  EXPECT_EQ(b.combine_per_split_us, fit.combine_per_split_us);
  EXPECT_EQ(CalibratedModelYaml(*back, {}), CalibratedModelYaml(*model, {}));
  // Rows another kernel ran (no FlashAttention backend named) are not given its grid.
  ProfileTable unnamed = table;
  for (ProfileRow& r : unnamed.rows) r.attention_backend.clear();
  auto servelab_kernel = FitProfiles({unnamed});
  ASSERT_TRUE(servelab_kernel.ok());
  EXPECT_FALSE(servelab_kernel->ops.at(Op::kAttentionDecode).split_kv);
  // Without the kernel's grid in the times (a plain fixed + bytes kernel), the fit keeps
  // the plain form.
  OpFit plain;
  plain.op = Op::kAttentionDecode;
  plain.fixed_us = 8;
  plain.memory_efficiency = 0.7;
  plain.compute_efficiency = 0.5;
  auto other = FitProfiles({Generate(plain)});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->ops.at(Op::kAttentionDecode).split_kv);
}

// A paired CTA's first 512 tokens at a rate of their own: the fit finds the ramp's length
// among whole blocks, its rate and the others'.
TEST(SplitKvDecodeTest, TheFitRecoversAPairedRamp) {
  OpFit truth = SplitTruth();
  truth.pair_ramp_tokens = 512;
  truth.pair_ramp_memory_efficiency = 1.2;
  const ProfileTable table = Generate(truth);
  auto model = FitProfiles({table});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const OpFit& fit = model->ops.at(Op::kAttentionDecode);
  EXPECT_EQ(fit.pair_ramp_tokens, 512);
  EXPECT_NEAR(fit.pair_ramp_memory_efficiency, 1.2, 1e-7);
  EXPECT_NEAR(fit.pair_memory_efficiency, 2.0, 1e-7);
  EXPECT_NEAR(fit.cta_memory_efficiency, 1.5, 1e-7);
  EXPECT_NEAR(fit.wave_us, 5.0, 1e-6);
  auto e = Evaluate(*model, table);
  ASSERT_TRUE(e.ok());
  EXPECT_LT(e->ops.at("attention_decode").max_error, 1e-6);
  // The model file keeps the ramp.
  const std::string yaml = CalibratedModelYaml(*model, {});
  EXPECT_THAT(yaml, HasSubstr("    pair_ramp_tokens: 512\n"));
  auto back = testing::ReadModelText(yaml, "split_kv_ramp");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ops.at(Op::kAttentionDecode).pair_ramp_tokens, 512);
  EXPECT_EQ(back->ops.at(Op::kAttentionDecode).pair_ramp_memory_efficiency,
            fit.pair_ramp_memory_efficiency);
}

// The message reading a model file of `ops` gives.
std::string ReadError(const std::string& ops) {
  auto model = testing::ReadModelText("device: a100-80gb\nops:\n" + ops, "split_kv_bad");
  return model.ok() ? "(read)" : model.status().message();
}

TEST(SplitKvDecodeTest, SplitKvKeysBelongToItsForm) {
  const std::string decode =
      "  attention_decode:\n    fixed_us: 1\n    memory_efficiency: 1\n"
      "    compute_efficiency: 1\n";
  EXPECT_THAT(ReadError(decode + "    form: additive\n    wave_us: 3\n"),
              HasSubstr(":8: ops.attention_decode.wave_us: only the split_kv form has it"));
  EXPECT_THAT(ReadError(decode + "    form: split_kv\n    wave_us: 3\n"),
              HasSubstr("ops.attention_decode.cta_memory_efficiency: missing (split_kv form)"));
  EXPECT_THAT(ReadError(decode + "    form: split_kv\n    cta_memory_efficiency: 1\n"
                                 "    pair_memory_efficiency: 2\n    wave_us: 3\n"
                                 "    combine_us: 4\n"),
              HasSubstr("ops.attention_decode.combine_per_split_us: missing (split_kv form)"));
  EXPECT_THAT(ReadError(decode + "    form: split_kv\n    cta_memory_efficiency: 1\n"
                                 "    pair_memory_efficiency: 2\n    wave_us: 3\n"
                                 "    combine_us: 4\n    combine_per_split_us: -1\n"),
              HasSubstr(":12: ops.attention_decode.combine_per_split_us"));
  const std::string split = decode +
                            "    form: split_kv\n    cta_memory_efficiency: 1\n"
                            "    pair_memory_efficiency: 2\n    wave_us: 3\n"
                            "    combine_us: 4\n    combine_per_split_us: 1\n";
  EXPECT_EQ(ReadError(split), "(read)");  // no ramp keys: no ramp
  EXPECT_EQ(ReadError(split + "    pair_ramp_tokens: 0\n"), "(read)");
  EXPECT_THAT(ReadError(split + "    pair_ramp_tokens: 256\n"),
              HasSubstr("ops.attention_decode.pair_ramp_memory_efficiency: missing "
                        "(pair_ramp_tokens is not 0)"));
  EXPECT_THAT(ReadError(split + "    pair_ramp_memory_efficiency: 1\n"),
              HasSubstr(":13: ops.attention_decode.pair_ramp_memory_efficiency: needs "
                        "pair_ramp_tokens above 0"));
  EXPECT_THAT(ReadError(split + "    pair_ramp_tokens: -128\n"),
              HasSubstr(":13: ops.attention_decode.pair_ramp_tokens"));
  EXPECT_THAT(ReadError(split + "    pair_ramp_tokens: 100.5\n"),
              HasSubstr(":13: ops.attention_decode.pair_ramp_tokens: expected a whole number"));
  EXPECT_THAT(ReadError(decode + "    form: additive\n    pair_ramp_tokens: 128\n"),
              HasSubstr(":8: ops.attention_decode.pair_ramp_tokens: only the split_kv form "
                        "has it"));
  EXPECT_THAT(ReadError("  rope:\n    form: split_kv\n    fixed_us: 1\n    memory_efficiency: 1\n"),
              HasSubstr("ops.rope.form: rope is a stream op"));
}

// The simulator's decode steps count their own grid: the KV split over the batch's
// longest sequence, on the deployment GPU's SMs; hand-computed for one batch, and a GPU
// whose SMs are unknown is refused.
TEST(SplitKvDecodeTest, TheCostModelCountsTheBatchsGrid) {
  // Every op free but decode attention.
  CalibratedModel model = testing::FreeOpsModel("a100-80gb");
  model.ops[Op::kAttentionDecode] = SplitTruth();
  DeploymentSpec d;
  d.model = *FindModel("llama-2-70b");
  d.gpu = *FindGpu("a100-80gb");
  d.tensor_parallel = 2;
  const CalibratedCostModel cost(model, "m.yaml", d, 0);
  // Two sequences of 300 and 1,000 cached tokens (301 and 1,001 attended; 8 blocks):
  // 8 CTAs a split; eligible 1, 2, 3, 4, 8 splits, and 8 (64 CTAs, 0.593) is the best,
  // which 4 (0.296) does not come within 85% of: one block a split. The sequences reach
  // 3 and 8 splits: 44 busy CTAs, all in the launch's first round, one a SM, streaming one
  // block each; the combine merges 8 splits.
  Request a, b;
  a.prompt_len = 300;
  b.prompt_len = 1000;
  a.target_output_len = b.target_output_len = 10;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&a, 1, 300, true, false});
  plan.seqs.push_back(ScheduledRequest{&b, 1, 1000, true, false});
  const double bw = 2039e9;
  // K and V of 4 KV heads x 128 for each attended token; each query (32 heads x 128)
  // read and written.
  const double bytes = (301 + 1001) * 2.0 * 4 * 128 * 2 + 2 * (2.0 * 32 * 128 * 2);
  const double attention =
      1e-6 + bytes / (bw * 1.25) + 128 * 512 / (bw / 108 * 1.5) + 5e-6 + 6e-6 + 8 * 0.5e-6 +
      2 * 0.2e-6;
  EXPECT_NEAR(cost.OpsSeconds(plan), 80 * attention, 1e-12);  // 80 layers
  // The KV split over a fixed 4,096 (32 blocks), as Vidur's profiler allocated it: 8 CTAs
  // a split; eligible 1-8, 11, 16, 32; 11 splits (88 CTAs, 0.815) are the best, and 8
  // (0.593) falls short of 85% of it: 3 blocks a split. The sequences (3 and 8 blocks)
  // reach 1 and 3 splits: 16 busy CTAs, one a SM, streaming 3 blocks; 11 splits combined.
  const CalibratedCostModel allocated(model, "m.yaml", d, 0, /*split_kv_length=*/4096);
  const double fixed_length =
      1e-6 + bytes / (bw * 1.25) + 3 * 128 * 512 / (bw / 108 * 1.5) + 5e-6 + 6e-6 +
      11 * 0.5e-6 + 2 * 0.2e-6;
  EXPECT_NEAR(allocated.OpsSeconds(plan), 80 * fixed_length, 1e-12);
  // A paired ramp of 512 tokens changes only paired waves: these two sequences' CTAs are one
  // a SM. 30 sequences of 1,000 attended tokens (8 blocks, 120 CTAs: no split, two a SM on
  // some) pair: their CTAs' first 512 tokens (512 bytes each) take 2 / (SM share x 1.2)
  // instead of 2 / (SM share x 2.0) a byte, in each of 80 layers.
  CalibratedModel ramped = model;
  ramped.ops[Op::kAttentionDecode].pair_ramp_tokens = 512;
  ramped.ops[Op::kAttentionDecode].pair_ramp_memory_efficiency = 1.2;
  const CalibratedCostModel with_ramp(ramped, "m.yaml", d, 0);
  EXPECT_EQ(with_ramp.OpsSeconds(plan), cost.OpsSeconds(plan));
  std::vector<Request> thirty(30);
  StepPlan paired;
  for (Request& r : thirty) {
    r.prompt_len = 999;
    r.target_output_len = 10;
    paired.seqs.push_back(ScheduledRequest{&r, 1, 999, true, false});
  }
  const double share = bw / 108;
  EXPECT_NEAR(with_ramp.OpsSeconds(paired) - cost.OpsSeconds(paired),
              80 * 512 * 512 * (2 / (share * 1.2) - 2 / (share * 2.0)), 1e-12);
  // A GPU without its SM count cannot count the grid.
  DeploymentSpec custom = d;
  custom.gpu.name = "my-gpu";
  custom.gpu.sm_count = 0;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("servelab_split_kv_cm_" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  std::ofstream(path) << CalibratedModelYaml(model, {});
  const NamedParams named{"calibrated", {Param{"path", path, "e.yaml:3"}}, "cost_model",
                          "e.yaml:3", "/"};
  auto refused = BuiltinCostModels().Make(named, custom);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("hardware.gpu.sm_count (my-gpu has none)"));
  // split_kv_length: read with a split_kv fit (and bounded), refused without one.
  const NamedParams length{
      "calibrated",
      {Param{"path", path, "e.yaml:3"}, Param{"split_kv_length", "4096", "e.yaml:4"}},
      "cost_model", "e.yaml:3", "/"};
  NamedParams resolved;
  ASSERT_TRUE(BuiltinCostModels().Make(length, d, &resolved).ok());
  ASSERT_EQ(resolved.params.size(), 3u);  // path, step_overhead_ms, split_kv_length
  EXPECT_EQ(resolved.params[2].value, "4096");
  const NamedParams negative{
      "calibrated",
      {Param{"path", path, "e.yaml:3"}, Param{"split_kv_length", "-1", "e.yaml:4"}},
      "cost_model", "e.yaml:3", "/"};
  auto out_of_range = BuiltinCostModels().Make(negative, d);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("split_kv_length"));
  CalibratedModel plain = model;
  plain.ops[Op::kAttentionDecode] = OpFit{};
  plain.ops[Op::kAttentionDecode].op = Op::kAttentionDecode;
  plain.ops[Op::kAttentionDecode].memory_efficiency = 1;
  plain.ops[Op::kAttentionDecode].compute_efficiency = 1;
  std::ofstream(path, std::ios::trunc) << CalibratedModelYaml(plain, {});
  auto no_grid = BuiltinCostModels().Make(length, d);
  std::filesystem::remove(path);
  ASSERT_FALSE(no_grid.ok());
  EXPECT_THAT(no_grid.status().message(),
              HasSubstr("e.yaml:4: cost_model.split_kv_length: " + path +
                        " has no split_kv decode fit for it to apply to"));
}

}  // namespace
}  // namespace servelab
