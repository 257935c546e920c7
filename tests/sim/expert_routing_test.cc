// How a MoE layer's tokens land on its experts: the rows a grouped GEMM computes once each
// expert's rows are rounded up to whole tiles, against the exact binomial expectation and
// hand-computed cases.
#include "sim/expert_routing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servelab {
namespace {

// E[ceil(X / tile)] for X ~ Binomial(tokens, q), summed exactly over the pmf (in logs).
double ExactTiles(double q, int64_t tokens, int32_t tile) {
  double sum = 0;
  for (int64_t x = 1; x <= tokens; ++x) {
    const double log_pmf = std::lgamma(tokens + 1.0) - std::lgamma(x + 1.0) -
                           std::lgamma(tokens - x + 1.0) + x * std::log(q) +
                           (tokens - x) * std::log1p(-q);
    sum += std::exp(log_pmf) * std::ceil(static_cast<double>(x) / tile);
  }
  return sum;
}

// Tile 1: the padded rows are the rows, with and without expert parallelism.
TEST(ExpertRoutingTest, TileOneIsTheRows) {
  for (const int32_t ep : {1, 4}) {
    const ExpertRouting routing(8, 2, ep, {});
    for (const double tokens : {1.0, 3.0, 64.0, 1000.0}) {
      EXPECT_EQ(routing.BusiestGpuPaddedRows(tokens, 1), routing.BusiestGpuRows(tokens));
    }
  }
  EXPECT_EQ(ExpertRouting(8, 2, 1, {}).BusiestGpuRows(100), 200.0);
}

// One token picks k experts, each one row short of a tile: k whole tiles.
TEST(ExpertRoutingTest, ADecodeOfOneTokenComputesATileForEachOfItsExperts) {
  for (const int32_t tile : {16, 64, 128}) {
    EXPECT_NEAR(ExpertRouting(8, 2, 1, {}).BusiestGpuPaddedRows(1, tile), 2.0 * tile, 1e-6 * tile);
    EXPECT_NEAR(ExpertRouting(128, 8, 1, {}).BusiestGpuPaddedRows(1, tile), 8.0 * tile,
                1e-6 * tile);
  }
}

// Against the exact expectation over the binomial, where a tile holds a few, many or a
// fraction of an expert's rows: within 1% (the pmf's sum where an expert's rows are few,
// the normal approximation where they are many).
TEST(ExpertRoutingTest, PaddedRowsMatchTheExactBinomialExpectation) {
  struct Layer {
    int32_t experts, per_token;
  };
  for (const Layer layer : {Layer{8, 2}, Layer{60, 4}, Layer{64, 6}, Layer{128, 8}}) {
    for (const int32_t tile : {2, 16, 64, 128}) {
      for (const int64_t tokens : {1, 5, 16, 64, 256, 1000, 4096, 8192}) {
        const double q = static_cast<double>(layer.per_token) / layer.experts;
        const double exact = layer.experts * tile * ExactTiles(q, tokens, tile);
        const double padded =
            ExpertRouting(layer.experts, layer.per_token, 1, {}).BusiestGpuPaddedRows(tokens, tile);
        EXPECT_NEAR(padded, exact, 0.01 * exact)
            << layer.experts << " experts, top " << layer.per_token << ", tile " << tile << ", "
            << tokens << " tokens";
        EXPECT_GE(padded, 0.99 * tokens * layer.per_token);  // at least the rows
      }
    }
  }
}

// Mixtral at 4,096 tokens: each of 8 experts gets X ~ Binomial(4096, 1/4) rows, mean 1,024
// = 16 tiles of 64, sd 27.7: 16 tiles when X <= 1,024, 17 when above (P = 1/2 - P(X =
// 1,024) / 2 = 0.4928), so 8 x 16.4928 x 64 = 8,444 rows.
TEST(ExpertRoutingTest, ManyRowsPadTheirLastTile) {
  EXPECT_NEAR(ExpertRouting(8, 2, 1, {}).BusiestGpuPaddedRows(4096, 64), 8444.3, 1.0);
}

// Expert parallelism over 4 GPUs with a configured imbalance of 1.5: the busiest GPU
// computes its quarter of every padded row and the half of a quarter of the rows more
// that its imbalance brings.
TEST(ExpertRoutingTest, TheBusiestGpuTakesItsShareAndItsImbalance) {
  ExpertRoutingOptions options;
  options.expert_imbalance = 1.5;
  const ExpertRouting ep(8, 2, 4, options);
  const ExpertRouting one(8, 2, 1, {});
  EXPECT_DOUBLE_EQ(ep.BusiestGpuRows(400), 800.0 / 4 * 1.5);
  EXPECT_DOUBLE_EQ(ep.BusiestGpuPaddedRows(400, 64),
                   one.BusiestGpuPaddedRows(400, 64) / 4 + 0.5 * 800.0 / 4);
  EXPECT_DOUBLE_EQ(ep.Touched(400), one.Touched(400));  // over all GPUs
}

// The experts given exactly one row: one token's k picks each; two tokens over 8 experts,
// 2 a token: each expert has one row with probability 2 (1/4)(3/4), 3 of them.
TEST(ExpertRoutingTest, OneRowExpertsByHand) {
  const ExpertRouting mixtral(8, 2, 1, {});
  EXPECT_NEAR(mixtral.BusiestGpuSingleRowExperts(1), 2.0, 1e-12);
  EXPECT_NEAR(mixtral.BusiestGpuSingleRowExperts(2), 3.0, 1e-12);
  EXPECT_NEAR(mixtral.BusiestGpuSingleRowExperts(100), 8 * 100 * 0.25 * std::pow(0.75, 99), 1e-15);
  EXPECT_NEAR(ExpertRouting(8, 2, 4, {}).BusiestGpuSingleRowExperts(2), 0.75, 1e-12);
}

// Skewed routing: the popular experts hold more rows, so fewer experts are touched and
// fewer tiles are wasted at a small batch than under uniform routing; under expert
// parallelism the GPU holding the popular ones carries more of the rows.
TEST(ExpertRoutingTest, SkewTouchesFewerExpertsThanUniformRouting) {
  ExpertRoutingOptions skewed;
  skewed.routing_skew = 1.5;
  const ExpertRouting skew(64, 2, 1, skewed), uniform(64, 2, 1, {});
  EXPECT_LT(skew.Touched(16), uniform.Touched(16));
  EXPECT_LT(skew.BusiestGpuPaddedRows(16, 64), uniform.BusiestGpuPaddedRows(16, 64));
  EXPECT_GT(ExpertRouting(64, 2, 4, skewed).BusiestGpuRows(1000),
            ExpertRouting(64, 2, 4, {}).BusiestGpuRows(1000));
}

// Locality: a decode is one draw; a chunk of 64 tokens at locality 0.5 over one favourite
// is 1 - 0.5^64 + 32 = 33 draws (half its tokens share one, the other half are their
// own, one token each), so it touches what 33 independent tokens touch, 8 (1 - 0.75^33) of Mixtral's 8
// experts, against 8 (1 - 0.75^64) for 64 independent tokens; at locality 1 it picks as
// one token: its k = 2 experts. Locality 0 changes nothing.
TEST(ExpertRoutingTest, AChunksTokensRouteTogetherUnderLocality) {
  ExpertRoutingOptions half;
  half.routing_locality = 0.5;
  const ExpertRouting local(8, 2, 1, half), independent(8, 2, 1, {});
  RoutedTokens step;
  local.Add(step, 64);
  local.Add(step, 1);
  local.Add(step, 1);
  local.Add(step, 0);
  EXPECT_DOUBLE_EQ(step.tokens, 66.0);
  EXPECT_DOUBLE_EQ(step.draws, 35.0);
  EXPECT_DOUBLE_EQ(step.single_draws, 34.0);  // the chunk's own 32 and the two decodes
  RoutedTokens chunk;
  local.Add(chunk, 64);
  EXPECT_NEAR(local.Touched(chunk), 8 * (1 - std::pow(0.75, 33)), 1e-12);
  EXPECT_NEAR(independent.Touched(64), 8 * (1 - std::pow(0.75, 64)), 1e-12);
  EXPECT_EQ(local.BusiestGpuRows(chunk), 128.0);  // every token still has its k rows
  RoutedTokens three;
  for (int i = 0; i < 3; ++i) local.Add(three, 64);
  EXPECT_DOUBLE_EQ(local.Sequences(3, 64).draws, three.draws);
  EXPECT_DOUBLE_EQ(local.Sequences(3, 64).tokens, 192.0);
  EXPECT_DOUBLE_EQ(local.Sequences(5, 1).single_draws, 5.0);

  ExpertRoutingOptions whole;
  whole.routing_locality = 1;
  RoutedTokens one;
  ExpertRouting(8, 2, 1, whole).Add(one, 64);
  EXPECT_DOUBLE_EQ(one.draws, 1.0);
  EXPECT_NEAR(ExpertRouting(8, 2, 1, whole).Touched(one), 2.0, 1e-12);

  RoutedTokens same;
  for (const int32_t n : {64, 1, 17, 1}) independent.Add(same, n);
  EXPECT_EQ(same.draws, 83.0);
  EXPECT_EQ(same.single_draws, 83.0);
  EXPECT_EQ(independent.Touched(same), independent.Touched(83));
  EXPECT_EQ(independent.BusiestGpuPaddedRows(same, 16), independent.BusiestGpuPaddedRows(83, 16));
  EXPECT_EQ(independent.BusiestGpuSingleRowExperts(same),
            independent.BusiestGpuSingleRowExperts(83));
}

// A sequence's favourites: every token one of its F shared draws (locality 1) uses
// F (1 - (1 - 1/F)^n) of them, the distinct draws n tokens picking among F at random:
// with 2 favourites, 1 token 1 draw, 2 tokens 1.5, 3 tokens 1.75, and never more than 2;
// with 4 favourites, 2 tokens 1.75 (2 - 1/4). Below locality 1 each token also brings its
// own with probability 1 - p: at 0.75 over 3 favourites, 4 tokens make
// 3 (1 - 0.75^4) + 0.25 x 4 = 3.05078125 draws. Never fewer than one, never more than
// the tokens; more favourites, more draws. Of them one token's: a shared draw that exactly
// one of n tokens picks, n (1/F) (1 - 1/F)^(n - 1) each: 3 tokens over 2 favourites,
// 2 x 3/8 = 0.75; plus the tokens' own, 1 (of 4) at 0.75 over 3 favourites beside
// 4 x 0.75 x (3/4)^3 once-used shared ones.
TEST(ExpertRoutingTest, ASequencesFavouritesAreAWorkingSet) {
  EXPECT_DOUBLE_EQ(LocalDraws(1, 2, 1), 1.0);
  EXPECT_DOUBLE_EQ(LocalDraws(2, 2, 1), 1.5);
  EXPECT_DOUBLE_EQ(LocalDraws(3, 2, 1), 1.75);
  EXPECT_NEAR(LocalDraws(1e6, 2, 1), 2.0, 1e-12);
  EXPECT_DOUBLE_EQ(LocalDraws(2, 4, 1), 1.75);
  EXPECT_NEAR(LocalDraws(4, 3, 0.75), 3 * (1 - std::pow(0.75, 4)) + 1.0, 1e-12);
  EXPECT_EQ(LocalDraws(7, 5, 0), 7.0);
  EXPECT_EQ(LocalDraws(0, 5, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(LocalSingleDraws(3, 2, 1), 0.75);
  EXPECT_NEAR(LocalSingleDraws(4, 3, 0.75), 1.0 + 4 * 0.75 * std::pow(0.75, 3), 1e-12);
  EXPECT_EQ(LocalSingleDraws(64, 1, 1), 0.0);  // the chunk as one token
  EXPECT_EQ(LocalSingleDraws(1, 2, 1), 1.0);
  EXPECT_EQ(LocalSingleDraws(9, 4, 0), 9.0);
  for (const double n : {1.0, 2.0, 17.0, 512.0, 1e5}) {
    for (const double f : {1.0, 3.8, 64.0, 1024.0}) {
      for (const double p : {0.0, 0.3, 0.982, 1.0}) {
        const double d = LocalDraws(n, f, p);
        EXPECT_GE(d, 1.0 - 1e-12) << n << " " << f << " " << p;
        EXPECT_LE(d, n + 1e-9) << n << " " << f << " " << p;
        if (p > 0 && n > 1) {
          EXPECT_GT(LocalDraws(n, f + 1, p), d);
        }
        const double single = LocalSingleDraws(n, f, p);
        EXPECT_GE(single, 0.0);
        EXPECT_LE(single, d + 1e-9) << n << " " << f << " " << p;
      }
    }
  }
  ExpertRoutingOptions o;
  o.routing_locality = 1;
  o.routing_favourites = 2;
  const ExpertRouting routing(8, 2, 1, o);
  EXPECT_DOUBLE_EQ(routing.Sequences(4, 3).draws, 7.0);
  EXPECT_NEAR(routing.Touched(routing.Sequences(1, 3)), 8 * (1 - std::pow(0.75, 1.75)), 1e-12);
}

// At locality 1 a chunk of 40 tokens brings 40 rows to each of its 2 experts: 3 tiles of
// 16 each, 96 padded rows for 80; 64 tokens fill 4 tiles each exactly. Three decodes
// beside a chunk of 64 at locality 0.5 (33 draws, 32 of them one token's): an expert has
// one row when exactly one of the 35 one-token draws picks it and no other draw does,
// 35 q (1 - q)^35 with q = 1/4, for each of 8.
TEST(ExpertRoutingTest, LocalityPilesAChunksRowsIntoItsExperts) {
  ExpertRoutingOptions whole;
  whole.routing_locality = 1;
  const ExpertRouting local(8, 2, 1, whole);
  RoutedTokens forty, sixty_four;
  local.Add(forty, 40);
  local.Add(sixty_four, 64);
  EXPECT_NEAR(local.BusiestGpuPaddedRows(forty, 16), 96.0, 1e-9);
  EXPECT_NEAR(local.BusiestGpuPaddedRows(sixty_four, 16), 128.0, 1e-9);
  EXPECT_EQ(local.BusiestGpuSingleRowExperts(forty), 0.0);

  ExpertRoutingOptions half;
  half.routing_locality = 0.5;
  const ExpertRouting mixed(8, 2, 1, half);
  RoutedTokens step;
  for (const int32_t n : {1, 64, 1, 1}) mixed.Add(step, n);
  EXPECT_NEAR(mixed.BusiestGpuSingleRowExperts(step), 8 * 35 * 0.25 * std::pow(0.75, 35), 1e-12);

  // Under expert parallelism over 2 GPUs the one draw's 2 picks set the imbalance.
  const ExpertRouting ep(8, 2, 2, whole);
  EXPECT_NEAR(ep.BusiestGpuRows(sixty_four), 128.0 / 2 * ExpertImbalance(2, 2.0), 1e-9);
  EXPECT_GT(ep.BusiestGpuRows(sixty_four), ExpertRouting(8, 2, 2, {}).BusiestGpuRows(64));
}

}  // namespace
}  // namespace servelab
