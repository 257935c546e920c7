// Prefix caching end to end on the simulator: hit rates by hand and on the Mooncake
// trace, conservation of every token, and what shared system prompts do to latency.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "driver/experiment.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

std::string WriteFixture(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "servelab_prefix_cache_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

ExperimentConfig TraceConfig(const std::string& path, PrefixCacheType type, int32_t block_size) {
  ExperimentConfig c;
  c.name = "prefix";
  c.seed = 1;
  c.model = *FindModel("llama-3.1-8b");
  c.hardware.gpu = *FindGpu("h100-80gb");
  c.hardware.tensor_parallel = 4;
  c.workload.has_trace = true;
  c.workload.trace.path = path;
  c.workload.trace.format = TraceFormat::kMooncake;
  c.scheduler.block_size = block_size;
  c.scheduler.has_prefix_cache = type != PrefixCacheType::kNone;
  c.scheduler.prefix_cache.type = type;
  return c;
}

struct Outputs {
  RunSummary summary;
  std::string requests_csv, steps_csv;
};

Outputs Simulate(const ExperimentConfig& c) {
  std::ostringstream requests, steps;
  auto outcome = RunSimulation(c, MetricsSinks{&requests, &steps, nullptr, 0});
  EXPECT_TRUE(outcome.ok()) << outcome.status().message();
  if (!outcome.ok()) return {};
  return Outputs{outcome->summary, requests.str(), steps.str()};
}

// Sums a column of a CSV (header + rows).
int64_t SumColumn(const std::string& csv, const std::string& name) {
  std::istringstream in(csv);
  std::string line, field;
  std::getline(in, line);
  int column = -1, i = 0;
  std::istringstream header(line);
  while (std::getline(header, field, ',')) {
    if (field == name) column = i;
    ++i;
  }
  EXPECT_GE(column, 0) << "no column " << name;
  int64_t sum = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    for (int j = 0; std::getline(row, field, ','); ++j) {
      if (j == column && !field.empty()) sum += std::stoll(field);
    }
  }
  return sum;
}

// Four requests far apart, Mooncake ids (512-token blocks):
//   r0 1024 tokens [0, 1]     nothing cached
//   r1 1536 tokens [0, 1, 2]  blocks 0, 1 cached: 1024 tokens
//   r2  700 tokens [0, 3]     block 0: 512 tokens
//   r3 1024 tokens [0, 1]     both ids seen, but the last token is computed: block 0 only
// With 512-token KV blocks: 4 of 2 + 3 + 2 + 2 = 9 blocks hit. With 16-token blocks the
// same tokens hit, except r3's: 63 blocks = 1008 tokens.
TEST(PrefixCacheResultsTest, MooncakeFixtureByHand) {
  const std::string path = WriteFixture(
      "four.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 4, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 10000, \"input_length\": 1536, \"output_length\": 4, \"hash_ids\": [0, 1, 2]}\n"
      "{\"timestamp\": 20000, \"input_length\": 700, \"output_length\": 4, \"hash_ids\": [0, 3]}\n"
      "{\"timestamp\": 30000, \"input_length\": 1024, \"output_length\": 4, \"hash_ids\": [0, 1]}\n");
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    const Outputs by512 = Simulate(TraceConfig(path, type, 512));
    ASSERT_TRUE(by512.summary.has_prefix_cache);
    EXPECT_EQ(by512.summary.prefix_cache.hit_blocks, 4);
    EXPECT_EQ(by512.summary.prefix_cache.queried_blocks, 9);
    EXPECT_EQ(by512.summary.prefix_cache.hit_tokens, 1024 + 512 + 512);
    EXPECT_EQ(by512.summary.prefix_cache.queried_tokens, 1024 + 1536 + 700 + 1024);
    const Outputs by16 = Simulate(TraceConfig(path, type, 16));
    EXPECT_EQ(by16.summary.prefix_cache.hit_tokens, 1024 + 512 + 1008);
    EXPECT_EQ(SumColumn(by16.requests_csv, "cached_tokens"), 1024 + 512 + 1008);
    EXPECT_EQ(SumColumn(by16.steps_csv, "cached_tokens"), 1024 + 512 + 1008);
  }
  // Caching off: no column, no block, same requests.
  const Outputs off = Simulate(TraceConfig(path, PrefixCacheType::kNone, 16));
  EXPECT_FALSE(off.summary.has_prefix_cache);
  EXPECT_EQ(off.requests_csv.find("cached_tokens"), std::string::npos);
  EXPECT_EQ(off.summary.num_finished, 4);
}

// The Mooncake conversation trace (../shared/data): with KV for every block the hit
// rate is the trace README's infinite-cache leading-prefix reuse, 36.6% of 512-token
// blocks; with less KV it falls, and hash and radix agree while nothing is evicted.
TEST(PrefixCacheResultsTest, MooncakeTraceReusesWhatItsReadmeStates) {
  const std::string path =
      std::string(SERVELAB_SHARED_DATA) + "/traces/mooncake_conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  double previous = 1.0;
  for (const int64_t blocks : {200000, 20000, 5000}) {
    ExperimentConfig c = TraceConfig(path, PrefixCacheType::kHash, 512);
    c.hardware.num_gpu_blocks = blocks;
    const Outputs hash = Simulate(c);
    ASSERT_EQ(hash.summary.num_finished, 12031);
    const PrefixCacheSummary& h = hash.summary.prefix_cache;
    SCOPED_TRACE(blocks);
    if (blocks == 200000) {
      EXPECT_EQ(h.evicted_blocks, 0);
      EXPECT_NEAR(h.block_hit_rate, 0.366, 0.005);
      c.scheduler.prefix_cache.type = PrefixCacheType::kRadix;
      const PrefixCacheSummary r = Simulate(c).summary.prefix_cache;
      EXPECT_EQ(r.hit_blocks, h.hit_blocks);
      EXPECT_EQ(r.hit_tokens, h.hit_tokens);
    } else {
      EXPECT_GT(h.evicted_blocks, 0);
    }
    EXPECT_LT(h.block_hit_rate, previous);
    previous = h.block_hit_rate;
  }
}

ExperimentConfig SystemPrompts(PrefixCacheType type) {
  ExperimentConfig c;
  c.name = "system_prompts";
  c.seed = 3;
  c.model = *FindModel("llama-3-8b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.scheduler.max_num_seqs = 64;
  c.workload.num_requests = 800;
  c.workload.arrival.rate = 5;
  c.workload.input_tokens = LengthDistConfig::Fixed(128);
  c.workload.output_tokens = LengthDistConfig::Fixed(64);
  c.workload.has_prefix = true;
  c.workload.prefix.num_prompts = 8;
  c.workload.prefix.prompt_tokens = LengthDistConfig::Fixed(2040);  // 127.5 hash blocks
  c.workload.prefix.popularity_theta = 1.0;
  c.scheduler.has_prefix_cache = type != PrefixCacheType::kNone;
  c.scheduler.prefix_cache.type = type;
  return c;
}

// Every token is accounted for: the steps compute exactly prompt + output - 1 +
// recomputed - cached tokens per request, and what the requests took from the cache is
// what the cache counted -- under preemption (little KV) and evictions.
TEST(PrefixCacheResultsTest, EveryTokenIsComputedOrCachedOnce) {
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    ExperimentConfig c = SystemPrompts(type);
    c.workload.arrival.rate = 20;
    c.hardware.num_gpu_blocks = 900;  // 14,400 tokens: preemptions and evictions
    c.workload.prefix.share = 0.7;
    const Outputs o = Simulate(c);
    const RunSummary& s = o.summary;
    ASSERT_EQ(s.num_finished, 800);
    EXPECT_GT(s.preemptions, 0);
    EXPECT_GT(s.prefix_cache.evicted_blocks, 0);
    const int64_t cached = SumColumn(o.requests_csv, "cached_tokens");
    EXPECT_EQ(cached, s.prefix_cache.hit_tokens);
    EXPECT_EQ(SumColumn(o.steps_csv, "cached_tokens"), cached);
    const int64_t computed =
        SumColumn(o.steps_csv, "prefill_tokens") + SumColumn(o.steps_csv, "decode_tokens");
    EXPECT_EQ(computed, s.input_tokens + s.output_tokens - s.num_finished +
                            s.recomputed_tokens - cached);
  }
}

// The prefixes as configured: 8 prompts of 2,040 tokens, 127 full 16-token hash blocks
// each; with a cache, once warm, a request computes its own 128 tokens plus the 8 of
// the prompt's partial block -- so TTFT falls at p50 and p99 and throughput rises.
TEST(PrefixCacheResultsTest, SharedSystemPromptsCutTtftAndRaiseThroughput) {
  const RunSummary off = Simulate(SystemPrompts(PrefixCacheType::kNone)).summary;
  const RunSummary on = Simulate(SystemPrompts(PrefixCacheType::kHash)).summary;
  ASSERT_EQ(on.num_finished, 800);
  EXPECT_EQ(on.input_tokens, off.input_tokens);
  EXPECT_EQ(on.input_tokens, 800 * (128 + 2040));
  // Each prompt's first use misses; every hit is the 127 hash blocks (2,032 tokens).
  EXPECT_EQ(on.prefix_cache.hit_tokens % 2032, 0);
  EXPECT_GE(on.prefix_cache.hit_tokens, (800 - 8 - 64) * 2032);  // misses: cold + concurrent
  EXPECT_LT(on.ttft_s.p50, 0.5 * off.ttft_s.p50);
  EXPECT_LT(on.ttft_s.p99, 0.5 * off.ttft_s.p99);
  EXPECT_GT(on.request_throughput, off.request_throughput);
}

// 48 system prompts of 2,048 tokens, uniform popularity, KV for ~23 of them, 11 req/s:
// FCFS admits in arrival order and thrashes the cache; longest-prefix-match admits the
// requests whose prompt is cached first, so more hit and the queue stays short (SGLang's
// result for lpm under a deep queue). dfs-weight does as well.
TEST(PrefixCacheResultsTest, LpmBeatsFcfsOnHitRateWhenTheQueueIsDeep) {
  ExperimentConfig c = SystemPrompts(PrefixCacheType::kRadix);
  c.hardware.num_gpu_blocks = 3000;
  c.scheduler.max_num_seqs = 32;
  c.workload.num_requests = 2000;
  c.workload.arrival.rate = 11;
  c.workload.input_tokens = LengthDistConfig::Fixed(64);
  c.workload.prefix.num_prompts = 48;
  c.workload.prefix.prompt_tokens = LengthDistConfig::Fixed(2048);
  c.workload.prefix.popularity_theta = 0;
  const RunSummary fcfs = Simulate(c).summary;
  c.scheduler.policy = NamedParams{"lpm", {}, "scheduler.policy", "", ""};
  const RunSummary lpm = Simulate(c).summary;
  c.scheduler.policy = NamedParams{"dfs-weight", {}, "scheduler.policy", "", ""};
  const RunSummary dfs = Simulate(c).summary;
  EXPECT_GT(lpm.prefix_cache.token_hit_rate, fcfs.prefix_cache.token_hit_rate + 0.05);
  EXPECT_GT(dfs.prefix_cache.token_hit_rate, fcfs.prefix_cache.token_hit_rate + 0.05);
  EXPECT_LT(lpm.ttft_s.p50, fcfs.ttft_s.p50);
  EXPECT_LT(lpm.queue_s.mean, fcfs.queue_s.mean);
}

// Four replicas, each with KV for ~31 of 64 system prompts of 4,096 tokens: round-robin
// sends every prompt everywhere and each replica thrashes; the cache-aware router keeps
// each prompt on the replica that has it, so the hit rate and TTFT are far better.
TEST(PrefixCacheResultsTest, CacheAwareRoutingBeatsRoundRobinOnHitRateAndTtft) {
  ExperimentConfig c = SystemPrompts(PrefixCacheType::kRadix);
  c.cluster.replicas = 4;
  c.hardware.num_gpu_blocks = 8000;
  c.workload.num_requests = 4000;
  c.workload.arrival.rate = 20;
  c.workload.input_tokens = LengthDistConfig::Fixed(64);
  c.workload.prefix.num_prompts = 64;
  c.workload.prefix.prompt_tokens = LengthDistConfig::Fixed(4096);
  c.workload.prefix.popularity_theta = 0.6;
  c.cluster.router = NamedParams{"round_robin", {}, "cluster.router", "", ""};
  const RunSummary rr = Simulate(c).summary;
  c.cluster.router = NamedParams{"cache_aware", {}, "cluster.router", "", ""};
  const RunSummary aware = Simulate(c).summary;
  ASSERT_EQ(aware.num_finished, 4000);
  ASSERT_EQ(aware.prefix_cache_replicas.size(), 4u);
  EXPECT_GT(aware.prefix_cache.token_hit_rate, rr.prefix_cache.token_hit_rate + 0.2);
  EXPECT_LT(aware.ttft_s.p50, 0.5 * rr.ttft_s.p50);
  EXPECT_LT(aware.ttft_s.p99, rr.ttft_s.p99);
  for (const PrefixCacheSummary& r : aware.prefix_cache_replicas) EXPECT_GT(r.queried_tokens, 0);
}

// Rows of a requests.csv, by column name.
std::vector<std::map<std::string, std::string>> Rows(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, field;
  std::getline(in, line);
  std::vector<std::string> header;
  std::istringstream h(line);
  while (std::getline(h, field, ',')) header.push_back(field);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> row;
    std::istringstream r(line);
    for (size_t i = 0; i < header.size() && std::getline(r, field, ','); ++i) row[header[i]] = field;
    rows.push_back(std::move(row));
  }
  return rows;
}

// Multi-turn sessions, closed loop, with KV for everything: each turn's prompt is the
// previous turn's prompt and answer plus a new message, it arrives after the previous
// answer, and it takes from the cache exactly the previous turn's full blocks -- of its
// prompt and answer (reuse_answers), or of its prompt only (the engine's setting).
TEST(PrefixCacheResultsTest, SessionTurnsReuseTheConversationSoFar) {
  for (const bool reuse_answers : {true, false}) {
    ExperimentConfig c = SystemPrompts(PrefixCacheType::kHash);
    c.workload.num_requests = 60;  // sessions
    c.workload.arrival.rate = 2;
    c.workload.input_tokens.dist = LengthDist::kUniform;
    c.workload.input_tokens.min = 20;
    c.workload.input_tokens.max = 300;
    c.workload.output_tokens.dist = LengthDist::kUniform;
    c.workload.output_tokens.min = 1;
    c.workload.output_tokens.max = 200;
    c.workload.prefix.prompt_tokens = LengthDistConfig::Fixed(1000);  // 62 full blocks + 8
    c.workload.has_sessions = true;
    c.workload.sessions.turns.dist = LengthDist::kUniform;
    c.workload.sessions.turns.min = 1;
    c.workload.sessions.turns.max = 6;
    c.workload.sessions.think_time_s = 5;
    c.workload.sessions.reuse_answers = reuse_answers;
    const Outputs o = Simulate(c);
    ASSERT_EQ(o.summary.prefix_cache.evicted_blocks, 0);
    struct Turn {
      double arrival, finish;
      int64_t input, output, cached;
    };
    std::map<int64_t, std::map<int32_t, Turn>> sessions;
    for (const auto& row : Rows(o.requests_csv)) {
      ASSERT_EQ(row.at("status"), "finished");
      const Turn t{std::stod(row.at("arrival_s")), std::stod(row.at("finish_s")),
                   std::stoll(row.at("input_tokens")), std::stoll(row.at("output_tokens")),
                   std::stoll(row.at("cached_tokens"))};
      ASSERT_TRUE(sessions[std::stoll(row.at("session"))].emplace(std::stoi(row.at("turn")), t).second);
    }
    ASSERT_EQ(sessions.size(), 60u);
    int64_t later_turns = 0;
    for (const auto& [id, turns] : sessions) {
      SCOPED_TRACE("session " + std::to_string(id));
      EXPECT_EQ(turns.rbegin()->first + 1, static_cast<int32_t>(turns.size())) << "turns 0..n-1";
      const int64_t first = turns.at(0).cached;
      EXPECT_TRUE(first == 0 || first == 992) << first;  // its system prompt, once computed
      for (int32_t k = 1; k < static_cast<int32_t>(turns.size()); ++k) {
        const Turn& prev = turns.at(k - 1);
        const Turn& cur = turns.at(k);
        EXPECT_GT(cur.input, prev.input + prev.output);
        EXPECT_GE(cur.arrival, prev.finish);
        // The previous turn computed its prompt and all but its last answer token.
        const int64_t reusable = reuse_answers ? prev.input + prev.output - 1 : prev.input;
        EXPECT_EQ(cur.cached, reusable / 16 * 16) << "turn " << k;
        ++later_turns;
      }
    }
    EXPECT_GT(later_turns, 100);
  }
}

// A radix path is as deep as a cached prompt is long in blocks: 120,000 one-token blocks
// here. dfs-weight walks it without recursion (it overflowed the stack) and without
// walking it again per request per step.
TEST(PrefixCacheResultsTest, DfsWeightHandlesPathsAsDeepAsAPrompt) {
  ExperimentConfig c = SystemPrompts(PrefixCacheType::kRadix);
  c.model = *FindModel("llama-3.1-8b");
  c.hardware.gpu = *FindGpu("h100-80gb");
  c.hardware.num_gpu_blocks = 400000;
  c.scheduler.block_size = 1;
  c.scheduler.max_num_seqs = 2;
  c.scheduler.max_num_batched_tokens = 131072;
  c.scheduler.policy = NamedParams{"dfs-weight", {}, "scheduler.policy", "", ""};
  c.workload.num_requests = 6;
  c.workload.arrival.rate = 1000;
  c.workload.prefix.num_prompts = 1;
  c.workload.prefix.prompt_tokens = LengthDistConfig::Fixed(120000);
  const RunSummary s = Simulate(c).summary;
  EXPECT_EQ(s.num_finished, 6);
  EXPECT_GE(s.prefix_cache.hit_tokens, 4 * 120000);
}

TEST(PrefixCacheResultsTest, SameSeedGivesByteIdenticalOutputs) {
  ExperimentConfig c = SystemPrompts(PrefixCacheType::kRadix);
  c.hardware.num_gpu_blocks = 900;
  const Outputs a = Simulate(c), b = Simulate(c);
  EXPECT_EQ(a.requests_csv, b.requests_csv);
  EXPECT_EQ(a.steps_csv, b.steps_csv);
  EXPECT_EQ(a.summary.ToJson().dump(), b.summary.ToJson().dump());
}

}  // namespace
}  // namespace servelab
