// The routing a MoE profile counted, as the simulator's routing model: the skew and the
// locality that generated the counts come back, per MoE shape.
#include "sim/counted_routing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using testing::SmallMixtral;

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
// route as n^0.6 draws: the decode rows give the skew, then the chunks the locality,
// each on its 0.01 grid; uniform, independent counts give 0 and 0.
TEST(CountedRoutingTest, RecoversTheSkewFromDecodesAndTheLocalityFromChunks) {
  const ModelSpec shape = SmallMixtral();
  const ExpertRouting truth(8, 2, 1, ExpertRoutingOptions{0, 1.3, 0.4});
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
  EXPECT_NEAR(c.routing_locality, 0.4, 1e-9);
  EXPECT_LT(c.decode_ratio, 1.0);
  EXPECT_LT(c.chunk_ratio, c.decode_ratio);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.expert_intermediate_size, shape.ExpertWidth());
  EXPECT_TRUE(c.Matches(shape));
  EXPECT_EQ(c.Options().routing_skew, c.routing_skew);
  EXPECT_EQ(c.Options().routing_locality, c.routing_locality);
  EXPECT_EQ(c.Options().expert_imbalance, 0.0);
  EXPECT_LT(c.touched_mape_pct, 1e-6);  // the counts are its own expectation
  EXPECT_GT(c.uniform_touched_mape_pct, 10.0);

  const CountedRouting e = CountedRoutingOf({even})[0];
  EXPECT_NEAR(e.routing_skew, 0.0, 1e-12);
  EXPECT_NEAR(e.routing_locality, 0.0, 1e-12);
  EXPECT_NEAR(e.decode_ratio, 1.0, 1e-12);
  EXPECT_NEAR(e.chunk_ratio, 1.0, 1e-12);
  EXPECT_LT(e.uniform_touched_mape_pct, 1e-9);
}

// The skew alone, from counts of decode batches of one token a sequence (a serving run's,
// `validate`): a Zipf exponent of 0.57 comes back to the grid's 0.01, uniform counts give
// 0, no counts 0; one sequence's count (always k experts) says nothing of the skew.
TEST(CountedRoutingTest, FitsTheSkewOfDecodeCounts) {
  for (const double skew : {0.57, 0.0, 2.4}) {
    const ExpertRouting truth(8, 2, 1, ExpertRoutingOptions{0, skew, 0});
    std::vector<RoutingCount> counts;
    for (int64_t seqs = 1; seqs <= 16; ++seqs) {
      counts.push_back(RoutingCount{seqs, 1, truth.Touched(truth.Sequences(seqs, 1))});
    }
    EXPECT_NEAR(FitRoutingSkew(8, 2, counts), skew, 1e-9) << skew;
  }
  EXPECT_EQ(FitRoutingSkew(8, 2, {}), 0.0);
}

// The locality alone, at a skew, from lone chunks of 2 to 512 tokens (a serving run's,
// `validate`): the locality that counted them comes back to the grid's 0.01; fitted at
// another skew it does not; no counts give 0.
TEST(CountedRoutingTest, FitsTheLocalityOfChunkCounts) {
  for (const double locality : {0.63, 0.0, 1.0}) {
    const ExpertRouting truth(8, 2, 1, ExpertRoutingOptions{0, 0.3, locality});
    std::vector<RoutingCount> counts;
    for (int64_t tokens = 2; tokens <= 512; tokens *= 2) {
      counts.push_back(RoutingCount{1, tokens, truth.Touched(truth.Sequences(1, tokens))});
    }
    EXPECT_NEAR(FitRoutingLocality(8, 2, 0.3, counts), locality, 1e-9) << locality;
    if (locality == 0.63) {
      EXPECT_GT(std::abs(FitRoutingLocality(8, 2, 2.0, counts) - locality), 0.02);
    }
  }
  EXPECT_EQ(FitRoutingLocality(8, 2, 0.3, {}), 0.0);
}

// A skew given (a serving run's, `calibrate --routing-skew`) replaces the decode rows'
// fit, and the chunks' locality is fitted at it: chunks counted at skew 0 and locality
// 0.4 give back 0.4 beside decode rows skewed at 1.3, which alone would have given 1.3.
TEST(CountedRoutingTest, AGivenSkewAndTheLocalityFittedAtIt) {
  const ModelSpec shape = SmallMixtral();
  const ExpertRouting decodes(8, 2, 1, ExpertRoutingOptions{0, 1.3, 0});
  const ExpertRouting chunks(8, 2, 1, ExpertRoutingOptions{0, 0.0, 0.4});
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
  EXPECT_EQ(given.decode_rows, 8);  // still counted, and still in its mean error
  EXPECT_GT(given.touched_mape_pct, fitted.touched_mape_pct - 1e-12);
}

// A router belongs to its model: rows of two MoE shapes are two entries, each matching its
// own shape only; uncounted rows, one-token rows and dense models give none.
TEST(CountedRoutingTest, OneEntryPerMoeShape) {
  ModelSpec a = SmallMixtral(), b = SmallMixtral();
  b.moe_intermediate_size = 384;
  const ExpertRouting local(8, 2, 1, ExpertRoutingOptions{0, 0, 0.7});
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
  EXPECT_NEAR(counted[0].routing_locality, 0.7, 1e-9);
  EXPECT_EQ(counted[1].routing_locality, 0.0);
  ModelSpec dense = SmallMixtral();
  dense.num_experts = dense.num_experts_per_tok = 0;
  EXPECT_FALSE(counted[0].Matches(dense));
}

}  // namespace
}  // namespace servelab
