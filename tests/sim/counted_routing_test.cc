// The routing a MoE profile counted, as the simulator's routing model: the skew and the
// locality that generated the counts come back, per MoE shape.
#include "sim/counted_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using testing::SmallMixtral;

ExpertRoutingOptions Routed(double skew, double locality = 0, double favourites = 1) {
  ExpertRoutingOptions o;
  o.routing_skew = skew;
  o.routing_locality = locality;
  o.routing_favourites = favourites;
  return o;
}

// A moe_mlp row of `seqs` sequences of `each` tokens whose counted experts are what
// `routing` expects of them.
ProfileRow CountedRow(const ModelSpec& shape, const ExpertRouting& routing, int64_t seqs,
                      int32_t each) {
  ProfileRow r;
  r.device = "cpu";
  r.shape = shape;
  r.op = "moe_mlp";
  r.tokens = seqs * each;
  r.batch = seqs;
  RoutedTokens step;
  for (int64_t s = 0; s < seqs; ++s) routing.Add(step, each);
  r.experts_run = routing.Touched(step);
  r.median_ms = 1;
  return r;
}

// Decode batches under a Zipf popularity of exponent 1.3 and prefill chunks whose tokens
// follow their sequence's 2.5 favourite draws with probability 0.9: the decode rows give
// the skew, then the chunks the locality and favourites, each on its grid; uniform,
// independent counts give 0, 0 and 1.
TEST(CountedRoutingTest, RecoversTheSkewFromDecodesAndTheLocalityFromChunks) {
  const ModelSpec shape = SmallMixtral();
  const ExpertRouting truth(8, 2, 1, Routed(1.3, 0.9, 2.5));
  const ExpertRouting uniform(8, 2, 1, {});
  ProfileTable table, even;
  for (int64_t seqs = 2; seqs <= 16; seqs += 2) {
    table.rows.push_back(CountedRow(shape, truth, seqs, 1));
    even.rows.push_back(CountedRow(shape, uniform, seqs, 1));
  }
  for (const int32_t chunk : {4, 16, 64, 256}) {
    table.rows.push_back(CountedRow(shape, truth, 1, chunk));
    even.rows.push_back(CountedRow(shape, uniform, 1, chunk));
  }
  const std::vector<CountedRouting> counted = CountedRoutingOf({table});
  ASSERT_EQ(counted.size(), 1u);
  const CountedRouting& c = counted[0];
  EXPECT_EQ(c.decode_rows, 8);
  EXPECT_EQ(c.chunk_rows, 4);
  EXPECT_NEAR(c.routing_skew, 1.3, 1e-9);
  EXPECT_NEAR(c.routing_locality, 0.9, 1e-9);
  EXPECT_NEAR(c.routing_favourites, 2.5, 1e-9);
  EXPECT_LT(c.decode_ratio, 1.0);
  EXPECT_LT(c.chunk_ratio, c.decode_ratio);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.expert_intermediate_size, shape.ExpertWidth());
  EXPECT_TRUE(c.Matches(shape));
  EXPECT_EQ(c.Options().routing_skew, c.routing_skew);
  EXPECT_EQ(c.Options().routing_locality, c.routing_locality);
  EXPECT_EQ(c.Options().routing_favourites, c.routing_favourites);
  EXPECT_EQ(c.Options().expert_imbalance, 0.0);
  EXPECT_LT(c.touched_mape_pct, 1e-6);  // the counts are its own expectation
  EXPECT_GT(c.uniform_touched_mape_pct, 10.0);

  const CountedRouting e = CountedRoutingOf({even})[0];
  EXPECT_NEAR(e.routing_skew, 0.0, 1e-12);
  EXPECT_NEAR(e.routing_locality, 0.0, 1e-12);
  EXPECT_EQ(e.routing_favourites, 1.0);
  EXPECT_NEAR(e.decode_ratio, 1.0, 1e-12);
  EXPECT_NEAR(e.chunk_ratio, 1.0, 1e-12);
  EXPECT_LT(e.uniform_touched_mape_pct, 1e-9);
}

// The skew alone, from counts of decode batches of one token a sequence (a serving run's,
// `validate`): a Zipf exponent of 0.57 comes back to the grid's 0.01, uniform counts give
// 0, no counts 0; one sequence's count (always k experts) says nothing of the skew.
TEST(CountedRoutingTest, FitsTheSkewOfDecodeCounts) {
  for (const double skew : {0.57, 0.0, 2.4}) {
    const ExpertRouting truth(8, 2, 1, Routed(skew));
    std::vector<RoutingCount> counts;
    for (int64_t seqs = 1; seqs <= 16; ++seqs) {
      counts.push_back(RoutingCount{seqs, 1, truth.Touched(truth.Sequences(seqs, 1))});
    }
    EXPECT_NEAR(FitRoutingSkew(8, 2, counts), skew, 1e-9) << skew;
  }
  EXPECT_EQ(FitRoutingSkew(8, 2, {}), 0.0);
}

// The locality alone, at a skew, from lone chunks of 2 to 512 tokens (a serving run's,
// `validate`): the locality and favourites that counted them come back to the grid's
// 0.001 and 0.1 (the CPU engine's Mixtral's 0.982 over 3.8; independent tokens; a chunk
// as one token); fitted at another skew they do not; no counts give {1, 0}.
TEST(CountedRoutingTest, FitsTheLocalityOfChunkCounts) {
  for (const auto& [locality, favourites] :
       std::vector<std::pair<double, double>>{{0.982, 3.8}, {0.0, 1.0}, {1.0, 1.0}, {0.5, 12.3}}) {
    const ExpertRouting truth(8, 2, 1, Routed(0.3, locality, favourites));
    std::vector<RoutingCount> counts;
    for (int64_t tokens = 2; tokens <= 512; tokens *= 2) {
      counts.push_back(RoutingCount{1, tokens, truth.Touched(truth.Sequences(1, tokens))});
    }
    const RoutingLocality fit = FitRoutingLocality(8, 2, 0.3, counts);
    EXPECT_NEAR(fit.locality, locality, 1e-9) << locality;
    EXPECT_NEAR(fit.favourites, favourites, 1e-9) << locality;
    if (locality == 0.982) {
      const RoutingLocality elsewhere = FitRoutingLocality(8, 2, 2.0, counts);
      EXPECT_GT(std::abs(elsewhere.locality - locality) + std::abs(elsewhere.favourites - favourites),
                0.1);
    }
  }
  const RoutingLocality none = FitRoutingLocality(8, 2, 0.3, {});
  EXPECT_EQ(none.locality, 0.0);
  EXPECT_EQ(none.favourites, 1.0);
}

// Counts as a profile gives them, each off by up to half an expert (a mean over six
// layers of one draw; the CPU Mixtral's profile scatters about its fitted curve by 0.5
// experts RMS): chunks of 2 to 512 tokens counted three times each, the misses uniform in
// [-0.5, 0.5] (mt19937, seed 7). The CPU engine's Mixtral's 0.982 over 3.8 comes back
// within 0.005 and 0.5 (here 0.979 over 3.6), its expected experts within 0.15 of the
// noiseless ones for chunks up to 4,096 tokens.
TEST(CountedRoutingTest, FitsNoisyChunkCounts) {
  const ExpertRouting truth(8, 2, 1, Routed(0.28, 0.982, 3.8));
  std::mt19937 random(7);
  std::vector<RoutingCount> counts;
  for (int64_t tokens = 2; tokens <= 512; tokens = tokens * 3 / 2) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      const double miss = 1.0 * (static_cast<double>(random()) / std::mt19937::max() - 0.5);
      counts.push_back(RoutingCount{1, tokens, truth.Touched(truth.Sequences(1, tokens)) + miss});
    }
  }
  const RoutingLocality fit = FitRoutingLocality(8, 2, 0.28, counts);
  EXPECT_NEAR(fit.locality, 0.982, 0.005);
  EXPECT_NEAR(fit.favourites, 3.8, 0.5);
  const ExpertRouting fitted(8, 2, 1, Routed(0.28, fit.locality, fit.favourites));
  for (int64_t tokens = 2; tokens <= 4096; tokens *= 2) {
    EXPECT_NEAR(fitted.Touched(fitted.Sequences(1, tokens)), truth.Touched(truth.Sequences(1, tokens)), 0.15)
        << tokens;
  }
}

// Chunks of two tokens make 2 - p^2 / F draws: any favourites F fit them at some
// locality p, so the fit reproduces their count without saying which pair counted it.
TEST(CountedRoutingTest, ChunksTooShortToTellFavourites) {
  const ExpertRouting truth(8, 2, 1, Routed(0, 0.6, 4));
  EXPECT_NEAR(truth.Sequences(1, 2).draws, 2 - 0.36 / 4, 1e-12);
  const std::vector<RoutingCount> two{{1, 2, truth.Touched(truth.Sequences(1, 2))}};
  const RoutingLocality fit = FitRoutingLocality(8, 2, 0, two);
  const ExpertRouting fitted(8, 2, 1, Routed(0, fit.locality, fit.favourites));
  EXPECT_NEAR(fitted.Sequences(1, 2).draws, 1.91, 1e-4);
  EXPECT_NEAR(fit.locality * fit.locality / fit.favourites, 0.09, 1e-4);
}

// A skew given (a serving run's, `calibrate --routing-skew`) replaces the decode rows'
// fit, and the chunks' locality is fitted at it: chunks counted at skew 0, locality 0.4
// and 6 favourites give back 0.4 and 6 beside decode rows skewed at 1.3, which alone would
// have given 1.3.
TEST(CountedRoutingTest, AGivenSkewAndTheLocalityFittedAtIt) {
  const ModelSpec shape = SmallMixtral();
  const ExpertRouting decodes(8, 2, 1, Routed(1.3));
  const ExpertRouting chunks(8, 2, 1, Routed(0.0, 0.4, 6));
  ProfileTable table;
  for (int64_t seqs = 2; seqs <= 16; seqs += 2) table.rows.push_back(CountedRow(shape, decodes, seqs, 1));
  for (const int32_t chunk : {4, 16, 64, 256}) table.rows.push_back(CountedRow(shape, chunks, 1, chunk));
  const CountedRouting fitted = CountedRoutingOf({table})[0];
  EXPECT_NEAR(fitted.routing_skew, 1.3, 1e-9);
  EXPECT_FALSE(fitted.skew_given);
  const CountedRouting given = CountedRoutingOf({table}, 0.0)[0];
  EXPECT_TRUE(given.skew_given);
  EXPECT_EQ(given.routing_skew, 0.0);
  EXPECT_NEAR(given.routing_locality, 0.4, 1e-9);
  EXPECT_NEAR(given.routing_favourites, 6.0, 1e-9);
  EXPECT_EQ(given.decode_rows, 8);  // still counted, and still in its mean error
  EXPECT_GT(given.touched_mape_pct, fitted.touched_mape_pct - 1e-12);
}

// A router belongs to its model: rows of two MoE shapes are two entries, each matching its
// own shape only; uncounted rows, one-token rows and dense models give none.
TEST(CountedRoutingTest, OneEntryPerMoeShape) {
  ModelSpec a = SmallMixtral(), b = SmallMixtral();
  b.moe_intermediate_size = 384;
  const ExpertRouting local(8, 2, 1, Routed(0, 0.7));
  ProfileTable table;
  table.rows.push_back(CountedRow(a, local, 1, 64));
  table.rows.push_back(CountedRow(b, ExpertRouting(8, 2, 1, {}), 1, 64));
  table.rows.push_back(CountedRow(a, local, 1, 1));  // one token: k experts, whatever routing
  ProfileRow uncounted = CountedRow(b, local, 4, 1);
  uncounted.experts_run = 0;
  table.rows.push_back(uncounted);
  const std::vector<CountedRouting> counted = CountedRoutingOf({table});
  ASSERT_EQ(counted.size(), 2u);
  EXPECT_TRUE(counted[0].Matches(a));
  EXPECT_FALSE(counted[0].Matches(b));
  EXPECT_TRUE(counted[1].Matches(b));
  EXPECT_EQ(counted[0].chunk_rows, 1);
  EXPECT_EQ(counted[0].decode_rows, 0);
  EXPECT_NEAR(counted[0].routing_locality, 0.7, 1e-9);  // one chunk: the fewest favourites
  EXPECT_EQ(counted[0].routing_favourites, 1.0);
  EXPECT_EQ(counted[1].routing_locality, 0.0);
  ModelSpec dense = SmallMixtral();
  dense.num_experts = dense.num_experts_per_tok = 0;
  EXPECT_FALSE(counted[0].Matches(dense));
}

}  // namespace
}  // namespace servelab
