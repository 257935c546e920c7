#include "kernels/top_p_sample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::RandomNormal;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Params {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
};

// One row through the twin.
int32_t Sample(const std::vector<float>& logits, const Params& params, double u) {
  int32_t id = -1;
  cpu::TopPSample(&id, logits.data(), &params.temperature, &params.top_k, &params.top_p, &u, 1,
                  static_cast<int32_t>(logits.size()));
  return id;
}

// Logits whose softmax at temperature 1 is `probs` (up to f32 rounding of the logs).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Expects Sample(logits, params, u) == id for each (u, id).
void ExpectDraws(const std::vector<float>& logits, const Params& params,
                 const std::vector<std::pair<double, int32_t>>& draws, const std::string& what) {
  for (const auto& [u, id] : draws) {
    EXPECT_EQ(Sample(logits, params, u), id) << what << ", u = " << u;
  }
}

// Probabilities (0.1, 0.4, 0.2, 0.3); ranked: token 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1).
const std::vector<double> kFour = {0.1, 0.4, 0.2, 0.3};

TEST(TopPSampleTest, TopPKeepsTheShortestHeadReachingPAndDrawsInIdOrder) {
  const auto logits = LogitsOf(kFour);
  // 0.4 >= 0.35: {1} alone.
  ExpectDraws(logits, {1.0f, 0, 0.35f}, {{0.0, 1}, {0.5, 1}, {0.999, 1}}, "p 0.35");
  // 0.4 < 0.6 <= 0.4 + 0.3: {1, 3}; in id order token 1 covers u < 0.4 / 0.7 = 0.5714.
  ExpectDraws(logits, {1.0f, 0, 0.6f}, {{0.0, 1}, {0.57, 1}, {0.58, 3}, {0.999, 3}}, "p 0.6");
  // 0.7 < 0.75 <= 0.9: {1, 2, 3}; id order 1 (0.444), 2 (to 0.667), 3 — not the ranked order.
  ExpectDraws(logits, {1.0f, 0, 0.75f},
              {{0.0, 1}, {0.44, 1}, {0.45, 2}, {0.66, 2}, {0.67, 3}, {0.999, 3}}, "p 0.75");
  // 0.9 < 0.95: everything; cumulative in id order 0.1, 0.5, 0.7, 1.
  ExpectDraws(logits, {1.0f, 0, 0.95f},
              {{0.0, 0}, {0.099, 0}, {0.101, 1}, {0.499, 1}, {0.501, 2}, {0.699, 2}, {0.701, 3}},
              "p 0.95");
}

TEST(TopPSampleTest, TopKKeepsTheKMostLikely) {
  const auto logits = LogitsOf(kFour);
  ExpectDraws(logits, {1.0f, 1, 1.0f}, {{0.0, 1}, {0.999, 1}}, "k 1");
  ExpectDraws(logits, {1.0f, 2, 1.0f}, {{0.57, 1}, {0.58, 3}}, "k 2");
  ExpectDraws(logits, {1.0f, 3, 1.0f}, {{0.44, 1}, {0.45, 2}, {0.67, 3}}, "k 3");
  ExpectDraws(logits, {1.0f, 4, 1.0f}, {{0.099, 0}, {0.101, 1}}, "k 4 = all");
  ExpectDraws(logits, {1.0f, 100, 1.0f}, {{0.099, 0}, {0.101, 1}}, "k > vocab");
}

TEST(TopPSampleTest, TopPIsRelativeToTheTopKMass) {
  const auto logits = LogitsOf(kFour);
  // Top 2 = {1, 3}, mass 0.7; p 0.5 asks for 0.35 of it: {1}. (Of the whole row's mass it
  // would ask for 0.5 and keep {1, 3}; u = 0.9 would then draw 3.)
  ExpectDraws(logits, {1.0f, 2, 0.5f}, {{0.0, 1}, {0.9, 1}}, "k 2, p 0.5");
  // Top 3 mass 0.9: p 0.75 asks for 0.675 <= 0.7: {1, 3}; p 0.8 asks for 0.72: {1, 2, 3}.
  ExpectDraws(logits, {1.0f, 3, 0.75f}, {{0.57, 1}, {0.58, 3}}, "k 3, p 0.75");
  ExpectDraws(logits, {1.0f, 3, 0.8f}, {{0.44, 1}, {0.45, 2}, {0.67, 3}}, "k 3, p 0.8");
}

TEST(TopPSampleTest, TiesAtTheThresholdAreAllKept) {
  // Three tokens share the top logit: top_k 1 and 2 keep all three, equally likely.
  const std::vector<float> logits = {2.0f, 5.0f, 5.0f, 1.0f, 5.0f};
  for (int32_t k : {1, 2, 3}) {
    ExpectDraws(logits, {1.0f, k, 1.0f}, {{0.0, 1}, {0.32, 1}, {0.34, 2}, {0.65, 2}, {0.67, 4}},
                "k " + std::to_string(k));
  }
  // A small p is reached by the first tied token, and the whole group comes with it.
  ExpectDraws(logits, {1.0f, 0, 0.01f}, {{0.0, 1}, {0.5, 2}, {0.9, 4}}, "p 0.01");
  // k 4 reaches the next logit (2.0, token 0).
  EXPECT_EQ(Sample(logits, {1.0f, 4, 1.0f}, 0.0), 0);
}

TEST(TopPSampleTest, DrawIsTheFirstCumulativeStrictlyAboveUTimesMass) {
  // Four equal weights 2^40: u = j / 4 lands exactly on a cumulative boundary (u * M is exact)
  // and must pick token j, the first whose cumulative exceeds it.
  const std::vector<float> logits(4, 0.5f);
  ExpectDraws(logits, {}, {{0.0, 0}, {0.25, 1}, {0.5, 2}, {0.75, 3}}, "equal weights");
  ExpectDraws(logits, {}, {{std::nextafter(0.25, 0.0), 0}, {std::nextafter(1.0, 0.0), 3}},
              "just below");
}

TEST(TopPSampleTest, MaskedTokensAreNeverDrawn) {
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 0.0f, -kInf};
  for (int32_t k : {0, 2, 4}) {
    ExpectDraws(logits, {1.0f, k, 1.0f}, {{0.0, 1}, {0.4999, 1}, {0.5, 3}, {0.9999, 3}},
                "k " + std::to_string(k));
  }
}

TEST(TopPSampleTest, TemperatureScalesLogitsBeforeTheSoftmax) {
  // Logits (0, ln 3): p_0 = 1 / (1 + 3^(1/T)).
  const std::vector<float> logits = {0.0f, static_cast<float>(std::log(3.0))};
  for (float t : {1.0f, 0.5f, 2.0f, 100.0f}) {
    const double p0 = 1.0 / (1.0 + std::pow(3.0, 1.0 / t));
    ExpectDraws(logits, {t, 0, 1.0f}, {{p0 - 1e-4, 0}, {p0 + 1e-4, 1}},
                "T " + std::to_string(t));
  }
  // A cold temperature leaves the other token below 2^-40 of the top one: never drawn.
  ExpectDraws(logits, {1e-3f, 0, 1.0f}, {{0.0, 1}, {0.999, 1}}, "T 1e-3");
}

TEST(TopPSampleTest, TopK1IsArgmax) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    const auto logits = RandomNormal(1000, rng, 2.0f);
    const auto top = std::max_element(logits.begin(), logits.end());
    ASSERT_EQ(std::count(logits.begin(), logits.end(), *top), 1);
    const Params params{static_cast<float>(0.2 + 3 * uniform(rng)), 1,
                        static_cast<float>(0.05 + 0.95 * uniform(rng))};
    EXPECT_EQ(Sample(logits, params, uniform(rng)), top - logits.begin()) << "trial " << trial;
  }
}

// Counts of each token over the grid u = (n + 1/2) / draws, n < draws: by the inverse-CDF
// rule, count_i / draws is token i's kept probability to within 1 / draws.
std::vector<int64_t> GridCounts(const std::vector<float>& logits, const Params& params,
                                int32_t draws) {
  std::vector<int64_t> counts(logits.size());
  for (int32_t n = 0; n < draws; ++n) ++counts[Sample(logits, params, (n + 0.5) / draws)];
  return counts;
}

// Float64 reference: the kept set's renormalised probabilities (0 outside it), and the
// smallest relative gap between the top-p target and a prefix mass, so a caller can refuse
// a case the float rule might decide either way.
struct Reference {
  std::vector<double> probs;
  double top_p_margin = 1.0;
};

Reference KeptProbabilities(const std::vector<float>& logits, const Params& params) {
  const auto n = static_cast<int32_t>(logits.size());
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> w(n);
  for (int32_t i = 0; i < n; ++i) w[i] = std::exp((logits[i] - max_logit) / params.temperature);
  std::vector<int32_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  // A prefix ends where the next ranked logit differs (tie groups stay whole).
  auto ends_group = [&](int32_t r) { return r + 1 == n || logits[rank[r + 1]] != logits[rank[r]]; };
  int32_t kept = n;  // ranks [0, kept)
  if (params.top_k > 0 && params.top_k < n) {
    kept = params.top_k;
    while (!ends_group(kept - 1)) ++kept;
  }
  double mass_k = 0;
  for (int32_t r = 0; r < kept; ++r) mass_k += w[rank[r]];
  Reference ref;
  if (params.top_p < 1.0f) {
    const double target = params.top_p * mass_k;
    double running = 0;
    for (int32_t r = 0; r < kept; ++r) {
      running += w[rank[r]];
      if (!ends_group(r)) continue;
      ref.top_p_margin = std::min(ref.top_p_margin, std::abs(running - target) / mass_k);
      if (running >= target) {
        kept = r + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (int32_t r = 0; r < kept; ++r) mass += w[rank[r]];
  ref.probs.assign(n, 0.0);
  for (int32_t r = 0; r < kept; ++r) ref.probs[rank[r]] = w[rank[r]] / mass;
  return ref;
}

TEST(TopPSampleTest, TopP1AndTopK0KeepEveryToken) {
  std::mt19937 rng(3);
  const auto logits = RandomNormal(8, rng);
  const int32_t draws = 100000;
  const auto counts = GridCounts(logits, {}, draws);
  const auto ref = KeptProbabilities(logits, {});
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_GT(counts[i], 0) << "token " << i;
    EXPECT_NEAR(counts[i], draws * ref.probs[i], 2.0) << "token " << i;
  }
}

TEST(TopPSampleTest, DrawDistributionIsTheRenormalisedKeptProbabilities) {
  std::mt19937 rng(11);
  const int32_t draws = 50000;
  const std::vector<Params> cases = {{1.0f, 0, 0.9f}, {0.7f, 0, 0.5f}, {1.5f, 5, 1.0f},
                                     {1.0f, 8, 0.8f}, {0.5f, 3, 0.95f}, {2.0f, 12, 0.6f}};
  for (const Params& params : cases) {
    const std::string what = "T " + std::to_string(params.temperature) + " k " +
                             std::to_string(params.top_k) + " p " + std::to_string(params.top_p);
    const auto logits = RandomNormal(16, rng, 1.5f);
    const auto ref = KeptProbabilities(logits, params);
    // The float rule agrees with float64 away from the top-p boundary (f32 weights: ~1e-7).
    ASSERT_GT(ref.top_p_margin, 1e-4) << what << ": pick another seed";
    const auto counts = GridCounts(logits, params, draws);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (ref.probs[i] == 0) {
        EXPECT_EQ(counts[i], 0) << what << ", token " << i << " is not kept";
      } else {
        EXPECT_NEAR(counts[i], draws * ref.probs[i], 2.0) << what << ", token " << i;
      }
    }
  }
}

TEST(TopPSampleTest, RowsAreIndependent) {
  std::mt19937 rng(5);
  const int32_t rows = 6, vocab = 300;
  const auto logits = RandomNormal(size_t(rows) * vocab, rng, 2.0f);
  const std::vector<float> temperatures = {1.0f, 0.5f, 2.0f, 1.0f, 0.8f, 1.2f};
  const std::vector<int32_t> top_ks = {0, 10, 0, 1, 50, 300};
  const std::vector<float> top_ps = {0.9f, 1.0f, 0.3f, 1.0f, 0.7f, 0.99f};
  const std::vector<double> uniforms = {0.1, 0.9, 0.5, 0.3, 0.0, 0.75};
  std::vector<int32_t> ids(rows, -1);
  cpu::TopPSample(ids.data(), logits.data(), temperatures.data(), top_ks.data(), top_ps.data(),
                  uniforms.data(), rows, vocab);
  for (int32_t t = 0; t < rows; ++t) {
    const std::vector<float> row(logits.begin() + t * vocab, logits.begin() + (t + 1) * vocab);
    EXPECT_EQ(ids[t], Sample(row, {temperatures[t], top_ks[t], top_ps[t]}, uniforms[t]))
        << "row " << t;
  }
}

TEST(TopPSampleTest, WeightIsTheExponentialOnAFixedPointGrid) {
  const double one = std::ldexp(1.0, kTopPWeightBits);
  EXPECT_EQ(TopPWeight(3.0f, 3.0f, 0.7f), uint64_t{1} << kTopPWeightBits);  // the top token
  for (float x = -27.9f; x < 0.0f; x += 0.0137f) {
    const double want = std::exp(double{x}) * one;
    const auto got = static_cast<double>(TopPWeight(x, 0.0f, 1.0f));
    // f32 precision on the grid (plus the grid's truncation for tiny weights).
    EXPECT_NEAR(got, want, want * 3e-7 + 1.0) << "x = " << x;
  }
  EXPECT_EQ(TopPWeight(-28.0f, 0.0f, 1.0f), 0u);
  EXPECT_EQ(TopPWeight(-kInf, 0.0f, 1.0f), 0u);
  // Order keys: monotone through zero and the infinities; -0 ties +0.
  const std::vector<float> ascending = {-kInf, -1e30f, -1.0f, -1e-40f, 0.0f, 1e-40f, 2.0f, kInf};
  for (size_t i = 1; i < ascending.size(); ++i) {
    EXPECT_LT(TopPOrderKey(ascending[i - 1]), TopPOrderKey(ascending[i])) << ascending[i];
  }
  EXPECT_EQ(TopPOrderKey(-0.0f), TopPOrderKey(0.0f));
}

TEST(TopPSampleTest, TargetAndDrawPointStayInsideTheMass) {
  const uint64_t big = (uint64_t{1} << 57) - 3;  // above 2^53: not exact in f64
  EXPECT_LT(TopPDrawPoint(std::nextafter(1.0, 0.0), big), big);
  EXPECT_EQ(TopPDrawPoint(0.0, big), 0u);
  EXPECT_EQ(TopPDrawPoint(0.5, 4), 2u);
  EXPECT_EQ(TopPTargetMass(1.0f, big), big);
  EXPECT_EQ(TopPTargetMass(0.5f, 4), 2u);
  EXPECT_EQ(TopPTargetMass(0.25f, 10), 3u);   // ceil(2.5)
  EXPECT_EQ(TopPTargetMass(1e-30f, 10), 1u);  // at least one unit: the top token
}

TEST(TopPSampleDeathTest, InvalidParametersAreBugs) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_DEATH(Sample(logits, {0.0f, 0, 1.0f}, 0.5), "temperature");
  EXPECT_DEATH(Sample(logits, {1.0f, -1, 1.0f}, 0.5), "top_k");
  EXPECT_DEATH(Sample(logits, {1.0f, 0, 0.0f}, 0.5), "top_p");
  EXPECT_DEATH(Sample(logits, {1.0f, 0, 1.5f}, 0.5), "top_p");
  EXPECT_DEATH(Sample(logits, {}, 1.0), "uniform");
  EXPECT_DEATH(Sample({-kInf, -kInf}, {}, 0.5), "max logit");
  EXPECT_DEATH(Sample({0.0f, std::nanf("")}, {}, 0.5), "NaN");
}

}  // namespace
}  // namespace servelab::kernels
