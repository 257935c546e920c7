#include "driver/workload.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "core/prefix_key.h"

#include "driver/trace_reader.h"

namespace servelab {
namespace {

LengthDistConfig Dist(LengthDist dist) {
  LengthDistConfig config;
  config.dist = dist;
  return config;
}

std::string WriteFixture(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "servelab_workload_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::unique_ptr<Workload> Make(const WorkloadConfig& config, uint64_t seed = 1) {
  auto w = MakeWorkload(config, seed);
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? std::move(w).value() : nullptr;
}

std::string ErrorOf(const WorkloadConfig& config) {
  auto w = MakeWorkload(config, 1);
  EXPECT_FALSE(w.ok());
  return w.ok() ? "" : w.status().message();
}

std::vector<Request> Drain(Workload& workload) {
  std::vector<Request> out;
  Request r;
  while (workload.Next(r)) out.push_back(r);
  return out;
}

WorkloadConfig Synthetic(int64_t num_requests) {
  WorkloadConfig c;
  c.num_requests = num_requests;
  c.arrival.rate = 10;
  c.input_tokens = Dist(LengthDist::kLognormal);
  c.input_tokens.mean = 500;
  c.output_tokens = Dist(LengthDist::kUniform);
  c.output_tokens.min = 1;
  c.output_tokens.max = 300;
  return c;
}

bool SameWorkloadFields(const Request& a, const Request& b) {
  return a.id == b.id && a.client == b.client && a.priority == b.priority &&
         a.arrival == b.arrival && a.prompt_len == b.prompt_len &&
         a.target_output_len == b.target_output_len;
}

TEST(WorkloadTest, SameSeedReproducesDifferentSeedDoesNot) {
  const WorkloadConfig c = Synthetic(2000);
  const auto a = Drain(*Make(c, 7));
  const auto b = Drain(*Make(c, 7));
  const auto other = Drain(*Make(c, 8));
  ASSERT_EQ(a.size(), 2000u);
  ASSERT_EQ(b.size(), 2000u);
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(SameWorkloadFields(a[i], b[i])) << i;
    EXPECT_EQ(a[i].id, static_cast<int64_t>(i));
    if (i > 0) {
      EXPECT_GE(a[i].arrival, a[i - 1].arrival);
    }
    EXPECT_GE(a[i].prompt_len, 1);
    differing += a[i].arrival != other[i].arrival;
  }
  EXPECT_GT(differing, 1990);
}

TEST(WorkloadTest, StreamsAreIndependentPerPurpose) {
  WorkloadConfig c = Synthetic(500);
  const auto base = Drain(*Make(c));
  c.output_tokens = Dist(LengthDist::kNormal);
  c.output_tokens.mean = 100;
  c.output_tokens.std = 30;
  const auto changed = Drain(*Make(c));
  ASSERT_EQ(base.size(), changed.size());
  for (size_t i = 0; i < base.size(); ++i) {
    ASSERT_EQ(base[i].arrival, changed[i].arrival);
    ASSERT_EQ(base[i].prompt_len, changed[i].prompt_len);
  }
}

TEST(WorkloadTest, DurationStopsAtFirstArrivalBeyondIt) {
  WorkloadConfig capped = Synthetic(0);
  capped.duration_s = 100;
  const auto cut = Drain(*Make(capped));
  const auto all = Drain(*Make(Synthetic(5000)));
  ASSERT_LT(cut.size(), all.size());
  // The cut stream is exactly the prefix of arrivals at or before 100 s.
  for (size_t i = 0; i < cut.size(); ++i) ASSERT_TRUE(SameWorkloadFields(cut[i], all[i]));
  EXPECT_LE(cut.back().arrival, 100 * kNsPerSec);
  EXPECT_GT(all[cut.size()].arrival, 100 * kNsPerSec);
  // Poisson(1000): within 5 sd.
  EXPECT_NEAR(static_cast<double>(cut.size()), 1000.0, 5 * std::sqrt(1000.0));
}

TEST(WorkloadTest, SyntheticNeedsALimit) {
  EXPECT_EQ(ErrorOf(Synthetic(0)), "workload: set num_requests or duration_s");
  WorkloadConfig burst = Synthetic(0);
  burst.arrival.process = ArrivalProcess::kBurst;
  burst.duration_s = 5;
  EXPECT_NE(ErrorOf(burst).find("workload.num_requests"), std::string::npos);
  WorkloadConfig bad = Synthetic(10);
  bad.input_tokens.mean = 0;
  EXPECT_NE(ErrorOf(bad).find("workload.input_tokens.mean"), std::string::npos);
}

TEST(WorkloadTest, ClientsFollowSharesAndCarryPriority) {
  WorkloadConfig c = Synthetic(100'000);
  c.clients = {{"chat", 1.0, 0, 1.0}, {"batch", 3.0, 5, 1.0}};
  auto w = Make(c);
  Request r;
  int64_t batch = 0, n = 0;
  while (w->Next(r)) {
    ++n;
    ASSERT_TRUE(r.client == 0 || r.client == 1);
    ASSERT_EQ(r.priority, r.client == 1 ? 5 : 0);
    batch += r.client == 1;
  }
  ASSERT_EQ(n, 100'000);
  // Binomial(1e5, 0.75): sd 137.
  EXPECT_NEAR(static_cast<double>(batch), 75'000.0, 700.0);
}

TEST(WorkloadTest, JointEmpiricalKeepsPairs) {
  std::string csv = "prompt,completion\n";
  for (int i = 1; i <= 50; ++i) csv += std::to_string(i * 7) + "," + std::to_string(i * 70) + "\n";
  WorkloadConfig c = Synthetic(5000);
  c.input_tokens = Dist(LengthDist::kEmpirical);
  c.input_tokens.path = WriteFixture("pairs.csv", csv);
  c.input_tokens.column = "prompt";
  c.output_tokens = c.input_tokens;
  c.output_tokens.column = "completion";
  std::set<int32_t> seen;
  for (const Request& r : Drain(*Make(c))) {
    ASSERT_EQ(r.target_output_len, 10 * r.prompt_len);
    seen.insert(r.prompt_len);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(WorkloadTest, MillionRequestsStreamLazily) {
  WorkloadConfig c = Synthetic(1'000'000);
  auto w = Make(c);
  Request r;
  int64_t n = 0;
  TimeNs last = 0;
  while (w->Next(r)) {
    ++n;
    last = r.arrival;
  }
  EXPECT_EQ(n, 1'000'000);
  EXPECT_EQ(r.id, 999'999);
  // 1e6 arrivals at 10/s: mean 1e5 s, sd 100 s.
  EXPECT_NEAR(ToSeconds(last), 100'000.0, 500.0);
}

WorkloadConfig TraceConfigFor(const std::string& path, TraceFormat format) {
  WorkloadConfig c;
  c.has_trace = true;
  c.trace.path = path;
  c.trace.format = format;
  return c;
}

std::string SmallSplitwise() {
  // 11 arrivals over 4 s (mean rate 2.5/s), unevenly spaced.
  return WriteFixture("small.csv",
                      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                      "1.0,10,1\n1.1,11,2\n1.2,12,3\n2.0,13,4\n2.5,14,5\n3.0,15,6\n"
                      "3.1,16,7\n3.9,17,8\n4.0,18,9\n4.5,19,10\n5.0,20,11\n");
}

TEST(WorkloadTest, TraceReplaysRecordsScaledByTimeScale) {
  WorkloadConfig c = TraceConfigFor(SmallSplitwise(), TraceFormat::kSplitwise);
  c.trace.time_scale = 2.0;
  const auto requests = Drain(*Make(c));
  ASSERT_EQ(requests.size(), 11u);
  EXPECT_EQ(requests[0].arrival, 0);
  EXPECT_EQ(requests[3].arrival, 2 * kNsPerSec);
  EXPECT_EQ(requests[10].arrival, 8 * kNsPerSec);
  EXPECT_EQ(requests[10].prompt_len, 20);
  EXPECT_EQ(requests[10].target_output_len, 11);
  EXPECT_EQ(requests[10].id, 10);
  EXPECT_EQ(requests[10].prefix_block_tokens, 0);
}

TEST(WorkloadTest, TraceRateRescalesToTheAskedMeanRate) {
  WorkloadConfig c = TraceConfigFor(SmallSplitwise(), TraceFormat::kSplitwise);
  c.trace.time_scale = 3.0;  // overridden by rate
  c.trace.rate = 7.5;
  const auto requests = Drain(*Make(c));
  ASSERT_EQ(requests.size(), 11u);
  const double rate = 10.0 / ToSeconds(requests.back().arrival - requests.front().arrival);
  EXPECT_NEAR(rate, 7.5, 1e-6);
  EXPECT_EQ(requests[3].arrival, 1'000'000'000 / 3);  // 1 s at 2.5/s -> 1/3 s at 7.5/s
}

TEST(WorkloadTest, TraceHonorsNumRequestsAndDuration) {
  WorkloadConfig c = TraceConfigFor(SmallSplitwise(), TraceFormat::kSplitwise);
  c.num_requests = 4;
  EXPECT_EQ(Drain(*Make(c)).size(), 4u);
  c.num_requests = 0;
  c.duration_s = 2.0;  // arrivals at 0, .1, .2, 1, 1.5, 2 (included), 2.1 (beyond)
  EXPECT_EQ(Drain(*Make(c)).size(), 6u);
}

TEST(WorkloadTest, MooncakeTraceCarriesPrefixHashes) {
  const std::string path = WriteFixture(
      "mc.jsonl",
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 9]}\n"
      "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": 3, \"hash_ids\": [0]}\n");
  const auto requests = Drain(*Make(TraceConfigFor(path, TraceFormat::kMooncake)));
  ASSERT_EQ(requests.size(), 2u);
  // The ids become prefix hashes: hash j names ids 0..j, so the first is shared and the
  // second differs from a lone id 9's.
  std::vector<uint64_t> chained{0, 9};
  ChainPrefixHashes(chained);
  EXPECT_EQ(requests[0].prefix_block_hashes, chained);
  std::vector<uint64_t> lone{9};
  ChainPrefixHashes(lone);
  EXPECT_NE(chained[1], lone[0]);
  EXPECT_EQ(requests[0].prefix_block_tokens, 512);
  EXPECT_EQ(requests[0].prefix_identified_tokens, 600);
  EXPECT_EQ(requests[1].prefix_block_hashes, (std::vector<uint64_t>{chained[0]}));
  EXPECT_EQ(requests[1].prefix_identified_tokens, 100);
  EXPECT_EQ(requests[1].arrival, 10 * kNsPerMs);
}

// Shared system prompts: a prompt's hashes are shared by every request that starts with
// it, and prompt_len grows by its length; with share 0 nobody gets one.
TEST(WorkloadTest, SharedSystemPromptsPrefixTheirRequests) {
  WorkloadConfig c;
  c.num_requests = 200;
  c.input_tokens = LengthDistConfig::Fixed(10);
  c.has_prefix = true;
  c.prefix.num_prompts = 3;
  c.prefix.prompt_tokens = LengthDistConfig::Fixed(40);  // 2 full 16-token blocks + 8
  const auto requests = Drain(*Make(c));
  std::set<std::vector<uint64_t>> distinct;
  for (const Request& r : requests) {
    EXPECT_EQ(r.prompt_len, 50);
    EXPECT_EQ(r.prefix_block_tokens, 16);
    EXPECT_EQ(r.prefix_identified_tokens, 32);
    ASSERT_EQ(r.prefix_block_hashes.size(), 2u);
    distinct.insert(r.prefix_block_hashes);
  }
  EXPECT_EQ(distinct.size(), 3u);
  c.prefix.share = 0;
  for (const Request& r : Drain(*Make(c))) {
    EXPECT_EQ(r.prompt_len, 10);
    EXPECT_TRUE(r.prefix_block_hashes.empty());
  }
}

// Sessions: turn k+1's prompt is turn k's prompt + answer + a new message, it arrives
// think time after turn k finished, its hashes extend turn k's, and the last turn (or a
// rejected one) has no follow-up.
TEST(WorkloadTest, SessionTurnsFollowTheirPredecessor) {
  WorkloadConfig c;
  c.num_requests = 5;
  c.input_tokens = LengthDistConfig::Fixed(30);
  c.output_tokens = LengthDistConfig::Fixed(20);
  c.has_sessions = true;
  c.sessions.turns = LengthDistConfig::Fixed(3);
  c.sessions.think_time_s = 2;
  auto w = Make(c);
  ASSERT_TRUE(w->HasFollowUps());
  Request first;
  ASSERT_TRUE(w->Next(first));
  EXPECT_EQ(first.session, 0);
  EXPECT_EQ(first.turn, 0);
  EXPECT_EQ(first.prompt_len, 30);
  EXPECT_EQ(first.prefix_identified_tokens, 50) << "prompt and answer";
  Request turn = first;
  std::vector<uint64_t> before = first.prefix_block_hashes;
  int64_t next_id = 1;
  for (int k = 1; k < 3; ++k) {
    turn.state = RequestState::kFinished;
    turn.finish = 100 * kNsPerSec;
    Request next;
    ASSERT_TRUE(w->FollowUp(turn, next));
    EXPECT_EQ(next.turn, k);
    EXPECT_EQ(next.session, 0);
    EXPECT_EQ(next.id, next_id++);
    EXPECT_EQ(next.prompt_len, turn.prompt_len + 20 + 30);
    EXPECT_GE(next.arrival, turn.finish);
    ASSERT_GE(next.prefix_block_hashes.size(), before.size());
    const size_t full = static_cast<size_t>(turn.prefix_identified_tokens / 16);
    for (size_t j = 0; j < full; ++j) EXPECT_EQ(next.prefix_block_hashes[j], before[j]) << j;
    before = next.prefix_block_hashes;
    turn = next;
  }
  turn.state = RequestState::kFinished;
  Request none;
  EXPECT_FALSE(w->FollowUp(turn, none)) << "three turns";
  Request second;
  ASSERT_TRUE(w->Next(second));
  EXPECT_EQ(second.session, 1);
  second.state = RequestState::kRejected;
  EXPECT_FALSE(w->FollowUp(second, none)) << "a rejected turn ends its session";
  c.sessions.turns = LengthDistConfig::Fixed(20000);
  EXPECT_NE(ErrorOf(c).find("workload.sessions.turns"), std::string::npos);
  // A conversation no model could serve is named by at most 2^24 tokens of hashes.
  c.sessions.turns = LengthDistConfig::Fixed(2);
  c.input_tokens = LengthDistConfig::Fixed(1'000'000'000);
  auto huge = Make(c);
  Request big;
  ASSERT_TRUE(huge->Next(big));
  EXPECT_EQ(big.prompt_len, 1'000'000'000);
  EXPECT_LE(big.prefix_block_hashes.size(), size_t{1} << 20);
  EXPECT_LE(big.prefix_identified_tokens, 1 << 24);
}

TEST(WorkloadTest, TraceErrorsPropagate) {
  auto missing = MakeWorkload(TraceConfigFor("/nonexistent/t.csv", TraceFormat::kAzure), 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const std::string one =
      WriteFixture("one.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n");
  WorkloadConfig c = TraceConfigFor(one, TraceFormat::kSplitwise);
  c.trace.rate = 2;
  EXPECT_NE(ErrorOf(c).find("workload.trace.rate"), std::string::npos);
}

TEST(WorkloadTest, SharedShareGptJointPairsComeFromTheFile) {
  const std::string path = std::string(SERVELAB_SHARED_DATA) +
                           "/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  std::set<std::pair<int32_t, int32_t>> pairs;
  {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    int32_t p = 0, d = 0;
    char comma = 0;
    while (in >> p >> comma >> d && std::getline(in, line)) pairs.insert({p, d});
  }
  ASSERT_EQ(pairs.empty(), false);
  WorkloadConfig c = Synthetic(20'000);
  c.input_tokens = Dist(LengthDist::kEmpirical);
  c.input_tokens.path = path;
  c.input_tokens.column = "num_prefill_tokens";
  c.output_tokens = c.input_tokens;
  c.output_tokens.column = "num_decode_tokens";
  for (const Request& r : Drain(*Make(c))) {
    ASSERT_TRUE(pairs.count({r.prompt_len, r.target_output_len})) << r.prompt_len;
  }
}

TEST(WorkloadTest, SharedAzureTraceAtDoubleRate) {
  const std::string path = std::string(SERVELAB_SHARED_DATA) + "/traces/azure2023_conv.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  WorkloadConfig c = TraceConfigFor(path, TraceFormat::kAzure);
  c.trace.rate = 11.0;
  const auto requests = Drain(*Make(c));
  ASSERT_EQ(requests.size(), 19'366u);
  EXPECT_NEAR(19'365.0 / ToSeconds(requests.back().arrival), 11.0, 1e-6);
}

}  // namespace
}  // namespace servelab
