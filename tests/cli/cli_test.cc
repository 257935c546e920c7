// The `servelab` binary as a user meets it: exit statuses, messages, result files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "driver/profile_table.h"
#include "policies/registry.h"
#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ReadFile;
using ::testing::HasSubstr;
using ::testing::Not;

using CliTest = testing::CliFixture;

constexpr const char* kSmall = R"(name: small
seed: 3
model: llama-2-7b
hardware: {gpu: a100-80gb}
scheduler: {max_num_seqs: 16}
workload:
  num_requests: 40
  arrival: {process: poisson, rate: 20}
  input_tokens: {dist: uniform, min: 10, max: 300}
  output_tokens: {dist: uniform, min: 1, max: 50}
slo: {ttft_ms: 500, tpot_ms: 50}
)";

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run("").exit_code, 2);
  EXPECT_EQ(Run("frobnicate").exit_code, 2);
  EXPECT_EQ(Run("run").exit_code, 2);
  EXPECT_EQ(Run("run x.yaml --bogus").exit_code, 2);
  EXPECT_EQ(Run("list nothing").exit_code, 2);
  EXPECT_EQ(Run("memory --model llama-2-7b").exit_code, 2);
  // Only regular files are read: /dev/zero would never end, a directory is named.
  const CliResult zero = Run("run /dev/zero");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_THAT(zero.err, HasSubstr("/dev/zero: the experiment file is not a regular file"));
  EXPECT_THAT(Run("run " + dir_.string()).err, HasSubstr("(a directory)"));
  // --out given empty (an unset variable) is said, not taken for the default place.
  const fs::path exp = Write("small.yaml", kSmall);
  for (const char* command : {"run", "sweep", "compare", "plan", "profile", "validate"}) {
    const CliResult empty = Run(std::string(command) + " " + exp.string() + " --out ''");
    EXPECT_EQ(empty.exit_code, 2) << command;
    EXPECT_THAT(empty.err, HasSubstr("--out: empty")) << command;
  }
  EXPECT_FALSE(fs::exists(dir_ / "results"));
}

TEST_F(CliTest, EverySubcommandHasHelp) {
  for (const char* command : {"--help", "run --help", "list --help", "memory --help",
                              "sweep --help", "compare --help"}) {
    const CliResult r = Run(command);
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_FALSE(r.out.empty()) << command;
  }
}

TEST_F(CliTest, ListShowsCatalogsAndRegistries) {
  EXPECT_THAT(Run("list gpus").out, HasSubstr("h200-141gb"));
  EXPECT_THAT(Run("list models").out, HasSubstr("qwen2.5-72b"));
  EXPECT_THAT(Run("list policies").out, HasSubstr("fcfs"));
  EXPECT_THAT(Run("list cost-models").out, HasSubstr("roofline"));
}

TEST_F(CliTest, MemoryReportsFitAndKvTokens) {
  const CliResult fits = Run("memory --model llama-2-7b --gpu a100-80gb");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_THAT(fits.out, HasSubstr("llama-2-7b"));
  const CliResult unknown = Run("memory --model llama-2-7b --gpu a100");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("Unable to find GPU 'a100'"));
}

// `memory` applies run's ranges and checks to the same keys: NaN, infinities, a tensor
// split that does not divide the heads, more stages than layers, a context past the
// window are errors naming the flag, exit 2 (they printed NaN or wrong figures).
TEST_F(CliTest, MemoryRefusesWhatRunRefuses) {
  const struct {
    const char* flags;
    const char* says;
  } cases[] = {
      {"--memory-utilization nan", "--memory-utilization (memory_utilization): value nan out of range"},
      {"--overhead-gib inf", "--overhead-gib (framework_overhead_gib): value inf out of range"},
      {"--tp 3", "--tp (tensor_parallel): 3 does not divide the 32 attention heads"},
      {"--pp 1000", "--pp (pipeline_parallel): value 1000 out of range"},
      {"--context 2147483647", "--context: 2147483647 is outside [0, 4096]"},
      {"--max-num-seqs 0", "--max-num-seqs (max_num_seqs): value 0 out of range"},
  };
  for (const auto& c : cases) {
    const CliResult r = Run(std::string("memory --model llama-2-7b --gpu a100-80gb ") + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.flags;
  }
  EXPECT_EQ(Run("memory --model llama-2-7b --gpu a100-80gb --tp 4 --context 4096").exit_code, 0);
}

TEST_F(CliTest, RunWritesEveryResultFileAndIsByteIdenticalAcrossRuns) {
  const fs::path exp = Write("small.yaml", kSmall);
  const CliResult first = Run("run " + exp.string() + " --out " + (dir_ / "a").string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(first.err.empty()) << "no progress line when stderr is not a terminal: " << first.err;
  EXPECT_THAT(first.out, HasSubstr("results: "));
  for (const char* f : {"requests.csv", "steps.csv", "summary.json", "summary.md", "trace.json",
                        "config.resolved.yaml"}) {
    EXPECT_TRUE(fs::exists(dir_ / "a" / f)) << f;
  }
  const CliResult second = Run("run " + exp.string() + " --out " + (dir_ / "b").string());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  for (const char* f : {"requests.csv", "steps.csv", "summary.json", "summary.md", "trace.json"}) {
    EXPECT_EQ(ReadFile(dir_ / "a" / f), ReadFile(dir_ / "b" / f)) << f;
  }
  // The resolved configs differ only in the output folder they record.
  std::string resolved_a = ReadFile(dir_ / "a" / "config.resolved.yaml");
  const std::string resolved_b = ReadFile(dir_ / "b" / "config.resolved.yaml");
  const std::string a_dir = (dir_ / "a").string(), b_dir = (dir_ / "b").string();
  ASSERT_NE(resolved_a.find(a_dir), std::string::npos);
  resolved_a.replace(resolved_a.find(a_dir), a_dir.size(), b_dir);
  EXPECT_EQ(resolved_a, resolved_b);
  // The resolved config runs again to the same results.
  const CliResult third =
      Run("run " + (dir_ / "a" / "config.resolved.yaml").string() + " --out " + (dir_ / "c").string());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(ReadFile(dir_ / "a" / "requests.csv"), ReadFile(dir_ / "c" / "requests.csv"));
}

TEST_F(CliTest, BadInputExitsTwoAndLeavesEarlierResultsIntact) {
  const fs::path exp = Write("small.yaml", kSmall);
  const fs::path out = dir_ / "r";
  ASSERT_EQ(Run("run " + exp.string() + " --out " + out.string()).exit_code, 0);
  const std::string before = ReadFile(out / "requests.csv");

  const CliResult bad_key = Run("run " + exp.string() + " --out " + out.string() +
                                " --set scheduler.max_num_seqs=zero");
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_THAT(bad_key.err, HasSubstr("scheduler.max_num_seqs: expected an integer"));

  const fs::path broken = Write("broken.yaml", "name: x\nmodel: llama-2-7b\n  bad indent: [\n");
  const CliResult syntax = Run("run " + broken.string() + " --out " + out.string());
  EXPECT_EQ(syntax.exit_code, 2);
  EXPECT_THAT(syntax.err, HasSubstr(broken.string() + ":"));

  const fs::path trace = Write("trace.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                            "2023-11-16 18:15:46.6805900,100,20\n"
                                            "2023-11-16 18:15:47.0000000,abc,20\n");
  const fs::path replay = Write("replay.yaml", std::string("name: replay\nmodel: llama-2-7b\n"
                                                           "hardware: {gpu: a100-80gb}\n"
                                                           "workload:\n  trace: {path: trace.csv, format: azure}\n"));
  const CliResult bad_trace = Run("run " + replay.string() + " --out " + out.string());
  EXPECT_EQ(bad_trace.exit_code, 2);
  EXPECT_THAT(bad_trace.err, HasSubstr(trace.string() + ":3"));
  EXPECT_THAT(bad_trace.err, HasSubstr("ContextTokens"));

  // A NUL byte (or any control byte) the message quotes is printed escaped, so the rest
  // of the message is not cut off.
  Write("trace.csv", std::string("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                 "2023-11-16 18:15:46.6805900,37\0x\x1b[2J,20\n", 80));
  const CliResult nul = Run("run " + replay.string() + " --out " + out.string());
  EXPECT_EQ(nul.exit_code, 2);
  EXPECT_THAT(nul.err, HasSubstr("got '37\\x00x\\x1b[2J', column 'ContextTokens'"));
  // So is a byte that is not UTF-8 (a Latin-1 file's): the message stays valid text.
  Write("trace.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,37\xe9\xe2\x82\xac,20\n");
  const CliResult latin1 = Run("run " + replay.string() + " --out " + out.string());
  EXPECT_EQ(latin1.exit_code, 2);
  EXPECT_THAT(latin1.err, HasSubstr("got '37\\xe9\xe2\x82\xac', column 'ContextTokens'"));
  // And an option the parser does not know, which it quotes.
  const CliResult option = Run("calibrate '--x\x1b[2J\xe9'");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_THAT(option.err, HasSubstr("--x\\x1b[2J\\xe9"));

  const CliResult missing = Run("run " + (dir_ / "nope.yaml").string());
  EXPECT_EQ(missing.exit_code, 2);

  // A folder where summary.json goes: found before the run, not after it; nothing the
  // earlier run wrote changes.
  fs::create_directories(dir_ / "s" / "summary.json");
  const CliResult folder = Run("run " + exp.string() + " --out " + (dir_ / "s").string());
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_THAT(folder.err, HasSubstr("summary.json: is a folder"));
  EXPECT_FALSE(fs::exists(dir_ / "s" / "requests.csv"));

  EXPECT_EQ(ReadFile(out / "requests.csv"), before);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << "temporary left: " << entry.path();
  }
}

// requests.csv rows as (arrival_s, id, input_tokens), sorted by arrival then id.
std::vector<std::tuple<double, std::string, std::string>> Arrivals(const std::string& csv) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  std::map<std::string, size_t> column;
  std::istringstream header(line);
  for (std::string name; std::getline(header, name, ',');) column[name] = column.size();
  std::vector<std::tuple<double, std::string, std::string>> rows;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    rows.emplace_back(std::stod(cells.at(column.at("arrival_s"))), cells.at(column.at("id")),
                      cells.at(column.at("input_tokens")));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST_F(CliTest, CompareRunsTheSameRequestsUnderEachPolicy) {
  // fcfs, plus up to two more of the registered policies (not the prefix-aware ones:
  // they need scheduler.prefix_cache, which this experiment leaves off).
  std::vector<std::string> policies = {"fcfs"};
  for (const auto& name : BuiltinPolicies().Names()) {
    if (name == "lpm" || name == "dfs-weight") continue;
    if (name != "fcfs" && policies.size() < 3) policies.push_back(name);
  }
  std::string list;
  for (const auto& p : policies) list += (list.empty() ? "" : ",") + p;
  const fs::path exp = Write("small.yaml", kSmall);
  const fs::path out = dir_ / "cmp";
  const CliResult r = Run("compare " + exp.string() + " --policies " + list + " --jobs 2 --out " +
                          out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| policy | finished |"));
  const std::string csv = ReadFile(out / "compare.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), static_cast<long>(policies.size()) + 1)
      << csv;
  EXPECT_EQ(ReadFile(out / "compare.md").find("| policy |") != std::string::npos, true);
  const auto first = Arrivals(ReadFile(out / "fcfs" / "requests.csv"));
  EXPECT_EQ(first.size(), 40u);
  for (const auto& p : policies) {
    EXPECT_THAT(csv, HasSubstr("\n" + p + "," + p + ",ok,"));
    EXPECT_EQ(Arrivals(ReadFile(out / p / "requests.csv")), first) << p;
  }
  EXPECT_EQ(Run("compare " + exp.string() + " --policies fcfs,nope --out " + out.string())
                .exit_code, 2);
  const CliResult lpm = Run("compare " + exp.string() + " --policies fcfs,lpm --out " +
                            out.string());
  EXPECT_EQ(lpm.exit_code, 2);
  EXPECT_THAT(lpm.err, HasSubstr("set scheduler.prefix_cache"));
  EXPECT_EQ(Run("compare " + exp.string()).exit_code, 2);
  // Compared again without plots: an earlier compare.png would describe other runs.
  std::ofstream(out / "compare.png") << "an earlier figure";
  const CliResult again = Run("compare " + exp.string() + " --policies fcfs --no-plots --out " + out.string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FALSE(fs::exists(out / "compare.png"));
}

// backend: engine runs the same experiment through the real CPU engine (the model is
// written on first use) and writes the same files with the same columns as the simulator.
TEST_F(CliTest, EngineBackendWritesTheSameFilesAsTheSimulator) {
  const fs::path exp = Write("engine.yaml", "name: engine\n"
                                            "seed: 2\n"
                                            "backend: engine\n"
                                            "engine: {model_path: model, create_model: true, kv_cache_gib: 0.05}\n"
                                            "model: {base: llama-3-8b, name: t, hidden_size: 64, num_hidden_layers: 2,\n"
                                            "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128,\n"
                                            "        vocab_size: 97, max_position_embeddings: 512}\n"
                                            "hardware: {gpu: a10}\n"
                                            "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 64}\n"
                                            "workload:\n"
                                            "  num_requests: 6\n"
                                            "  arrival: {process: burst}\n"
                                            "  input_tokens: {dist: uniform, min: 5, max: 40}\n"
                                            "  output_tokens: {dist: uniform, min: 1, max: 12}\n");
  const CliResult engine = Run("run " + exp.string() + " --out " + (dir_ / "e").string());
  ASSERT_EQ(engine.exit_code, 0) << engine.err;
  EXPECT_TRUE(fs::exists(dir_ / "model" / "config.json"));
  const CliResult sim = Run("run " + exp.string() + " --set backend=sim --out " + (dir_ / "s").string());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  for (const char* f : {"requests.csv", "steps.csv", "clients.csv"}) {
    const std::string e = ReadFile(dir_ / "e" / f), s = ReadFile(dir_ / "s" / f);
    EXPECT_EQ(e.substr(0, e.find('\n')), s.substr(0, s.find('\n'))) << f;
  }
  EXPECT_THAT(ReadFile(dir_ / "e" / "summary.json"), HasSubstr("\"backend\": \"engine\""));
  EXPECT_THAT(engine.out, HasSubstr("engine: 6 finished, 0 rejected"));
  // The header reports the pool that ran: 0.05 GiB of f32 K and V for 2 layers of 2 x 16
  // dims in blocks of 16 tokens = 53,687,091 / 8,192 bytes (the simulator's A10 holds far more).
  EXPECT_THAT(ReadFile(dir_ / "e" / "summary.json"), HasSubstr("\"kv_blocks_per_replica\": 6553,"));
  EXPECT_THAT(ReadFile(dir_ / "s" / "summary.json"), Not(HasSubstr("\"kv_blocks_per_replica\": 6553,")));
  // Device-generated random weights are a CUDA feature: bad input on the CPU engine.
  const CliResult random_cpu =
      Run("run " + exp.string() + " --set engine.weights=random --out " + (dir_ / "r").string());
  EXPECT_EQ(random_cpu.exit_code, 2);
  EXPECT_THAT(random_cpu.err, HasSubstr("engine.weights: random needs engine.device: cuda"));
  // The CUDA engine refuses this model's head_dim 16 before touching a device (exit 2) when
  // CUDA is built in, and says it is not built in otherwise (exit 2 too).
  const CliResult cuda = Run("run " + exp.string() +
                             " --set engine.device=cuda --set engine.weights=random --out " +
                             (dir_ / "c").string());
  EXPECT_EQ(cuda.exit_code, 2) << cuda.err;
#if SERVELAB_HAS_CUDA
  EXPECT_THAT(cuda.err, HasSubstr("head_dim 16 is not supported"));
#else
  EXPECT_THAT(cuda.err, HasSubstr("built without CUDA"));
#endif
  // Without create_model a missing folder is bad input naming the key.
  const fs::path missing = Write("missing.yaml", ReadFile(exp).replace(
      ReadFile(exp).find("create_model: true"), 18, "create_model: false"));
  fs::remove_all(dir_ / "model");
  const CliResult bad = Run("run " + missing.string() + " --out " + (dir_ / "m").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("engine.model_path"));
}

// Mixtures of experts on the CPU engine, end to end: a Mixtral and a Qwen2-MoE shape are
// written on first use, serve every request to its last token (ignore_eos), exactly as
// the simulator accounts for the same requests, and profile as whole steps (a MoE layer
// has no per-op work formulas yet).
TEST_F(CliTest, EngineServesMixturesOfExperts) {
  const std::string rest =
      "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96,\n"
      "        vocab_size: 97, max_position_embeddings: 512}\n"
      "hardware: {gpu: a10}\n"
      "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 32}\n"
      "workload:\n"
      "  num_requests: 8\n"
      "  arrival: {process: burst}\n"
      "  input_tokens: {dist: uniform, min: 5, max: 40}\n"
      "  output_tokens: {dist: uniform, min: 1, max: 12}\n";
  const struct {
    const char* name;
    std::string model;
    const char* model_type;
  } cases[] = {
      {"mixtral", "model: {base: mixtral-8x7b, name: m, hidden_size: 64, num_hidden_layers: 2,\n", "mixtral"},
      {"qwen", "model: {base: mixtral-8x7b, name: q, hidden_size: 64, num_hidden_layers: 2,\n"
               "        num_experts: 6, num_experts_per_tok: 3, moe_intermediate_size: 32,\n"
               "        shared_expert_intermediate_size: 48, attention_bias: true,\n",
       "qwen2_moe"},
  };
  for (const auto& c : cases) {
    const std::string folder = std::string("model_") + c.name;
    const fs::path exp = Write(std::string(c.name) + ".yaml",
                               "name: moe\nseed: 3\nbackend: engine\n"
                               "engine: {model_path: " + folder + ", create_model: true, "
                               "kv_cache_gib: 0.02, ignore_eos: true}\n" + c.model + rest);
    const fs::path e = dir_ / (std::string(c.name) + "_e"), s = dir_ / (std::string(c.name) + "_s");
    const CliResult engine = Run("run " + exp.string() + " --out " + e.string());
    ASSERT_EQ(engine.exit_code, 0) << c.name << ": " << engine.err;
    EXPECT_THAT(ReadFile(dir_ / folder / "config.json"),
                HasSubstr(std::string("\"model_type\": \"") + c.model_type + "\""));
    const CliResult sim = Run("run " + exp.string() + " --set backend=sim --out " + s.string());
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_THAT(engine.out, HasSubstr("moe: 8 finished, 0 rejected"));
    // Same requests, every token produced: the id, input and output columns agree row by
    // row once sorted by id (finishing order may differ).
    auto tokens = [](const std::string& csv) {
      std::vector<std::string> rows;
      std::istringstream in(csv);
      std::string line;
      std::getline(in, line);
      while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::istringstream cells(line);
        for (std::string cell; std::getline(cells, cell, ',');) f.push_back(cell);
        rows.push_back(f.at(0) + "," + f.at(8) + "," + f.at(9));
      }
      std::sort(rows.begin(), rows.end());
      return rows;
    };
    EXPECT_EQ(tokens(ReadFile(e / "requests.csv")), tokens(ReadFile(s / "requests.csv"))) << c.name;
    const fs::path profile = dir_ / (std::string(c.name) + "_profile.csv");
    const CliResult prof = Run("profile " + exp.string() + " --max-tokens 4 --max-batch 2 "
                               "--max-context 64 --repeats 1 --warmup 0 --warmup-ms 0 "
                               "--no-progress --out " + profile.string());
    ASSERT_EQ(prof.exit_code, 0) << prof.err;
    const std::string rows = ReadFile(profile);
    EXPECT_THAT(rows, HasSubstr(",step,"));
    EXPECT_THAT(rows, Not(HasSubstr(",gate_up_proj,")));
  }
}

// The calibration loop on the CPU engine, end to end: profile the engine, fit a cost
// model to the profile, validate the simulator against the engine at two loads.
TEST_F(CliTest, ProfileCalibrateValidate) {
  const std::string model =
      "model: {base: llama-3-8b, name: t, hidden_size: 64, num_hidden_layers: 2,\n"
      "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128,\n"
      "        vocab_size: 97, max_position_embeddings: 512}\n";
  const fs::path exp = Write("engine.yaml", "name: loop\nseed: 4\nbackend: engine\n"
                                            "engine: {model_path: model, create_model: true, kv_cache_gib: 0.02}\n" +
                                                model +
                                                "hardware: {gpu: a10}\n"
                                                "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 16}\n"
                                                "workload:\n"
                                                "  num_requests: 10\n"
                                                "  arrival: {process: poisson, rate: 50}\n"
                                                "  input_tokens: {dist: uniform, min: 5, max: 40}\n"
                                                "  output_tokens: {dist: uniform, min: 2, max: 12}\n"
                                                "sweep:\n  workload.arrival.rate: [50, 400]\n");
  const fs::path profile = dir_ / "p" / "profile.csv";
  const CliResult p = Run("profile " + exp.string() + " --out " + profile.string() +
                          " --max-context 300 --repeats 3 --warmup 1");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string csv = ReadFile(profile);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,vocab_size,"
            "layers,op,tokens,batch,context,tp,median_ms,p10_ms,p90_ms,repeats,num_experts,"
            "experts_per_token,expert_intermediate_size,shared_expert_intermediate_size,"
            "experts_run,single_row_experts,graph_rows,graph_context,after_prefill,prefill_before");
  EXPECT_THAT(csv, HasSubstr("\ncpu,64,4,2,16,128,97,2,attention_prefill,16,1,128,1,"));
  EXPECT_THAT(p.out, HasSubstr("measurements of t on cpu"));
  const CliResult unsettled = Run("profile " + exp.string() + " --out " + (dir_ / "bad.csv").string() +
                                  " --settle-ms -1");
  EXPECT_EQ(unsettled.exit_code, 2);
  EXPECT_THAT(unsettled.err, HasSubstr("--settle-ms -1: must be in [0, 60000]"));
  EXPECT_FALSE(fs::exists(dir_ / "bad.csv"));
  const CliResult spread_range = Run("profile " + exp.string() + " --out " + (dir_ / "bad.csv").string() +
                                     " --max-spread -3");
  EXPECT_EQ(spread_range.exit_code, 2);
  EXPECT_THAT(spread_range.err, HasSubstr("--max-spread -3.0: must be in [0, 1000] percent"));
  EXPECT_FALSE(fs::exists(dir_ / "bad.csv"));
  // --max-spread: a script's stop on a noisy host, the profile written all the same. No
  // 5 repeats' whole steps are equal to the nanosecond, so 0 is always passed.
  const fs::path noisy = dir_ / "noisy.csv";
  const CliResult stopped = Run("profile " + exp.string() + " --out " + noisy.string() +
                                " --max-context 40 --max-tokens 4 --repeats 5 --warmup 1 --max-spread 0");
  EXPECT_EQ(stopped.exit_code, 1) << stopped.err;
  EXPECT_THAT(stopped.err, HasSubstr("above --max-spread 0.0% in " + noisy.string() + " ("));
  EXPECT_THAT(ReadFile(noisy), HasSubstr(",step,"));
  // Said before anything is measured: a batch past the scheduler's (which would size a
  // buffer), repeats past their range, an output where a folder stands.
  const CliResult wide = Run("profile " + exp.string() + " --out " + (dir_ / "bad.csv").string() +
                             " --max-batch 2000000000");
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_THAT(wide.err, HasSubstr("--max-batch 2000000000: above "));
  EXPECT_THAT(wide.err, HasSubstr("engine.yaml:9: scheduler.max_num_seqs = 4"));
  const CliResult far = Run("profile " + exp.string() + " --out " + (dir_ / "bad.csv").string() +
                            " --max-context 100000");
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, HasSubstr("--max-context 100000: above the context the engine serves, "));
  EXPECT_FALSE(fs::exists(dir_ / "bad.csv"));
  // The profile written over its own experiment file: refused, the file as it was.
  const std::string experiment_text = ReadFile(exp);
  const CliResult over = Run("profile " + exp.string() + " --out " + exp.string());
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_THAT(over.err, HasSubstr(", an input of this command"));
  EXPECT_EQ(ReadFile(exp), experiment_text);
  const CliResult many = Run("profile " + exp.string() + " --out " + (dir_ / "bad.csv").string() +
                             " --repeats 100001");
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_THAT(many.err, HasSubstr("--repeats 100001: must be in [1, 100000]"));
  EXPECT_FALSE(fs::exists(dir_ / "bad.csv"));
  fs::create_directories(dir_ / "p" / "folder.csv");
  const CliResult onto = Run("profile " + exp.string() + " --out " + (dir_ / "p" / "folder.csv").string());
  EXPECT_EQ(onto.exit_code, 2);
  EXPECT_THAT(onto.err, HasSubstr("folder.csv: is a folder"));

  // Two model shapes profiled together, each to its own --out in one folder; a wrong
  // number of --out, or one file for both, is said before anything is measured.
  const fs::path narrow = Write("narrow.yaml", ReadFile(exp));
  {
    std::string text = ReadFile(narrow);
    text.replace(text.find("hidden_size: 64"), 15, "hidden_size: 32");
    text.replace(text.find("model_path: model"), 17, "model_path: narrow");
    Write("narrow.yaml", text);
  }
  const fs::path joint_dir = dir_ / "both";
  const std::string two = "profile " + exp.string() + " " + narrow.string() + " --max-context 40 --repeats 5 --warmup 0";
  const CliResult joint = Run(two + " --out " + (joint_dir / "a.csv").string() + " --out " + (joint_dir / "b.csv").string());
  ASSERT_EQ(joint.exit_code, 0) << joint.err;
  EXPECT_THAT(ReadFile(joint_dir / "a.csv"), HasSubstr("\ncpu,64,4,2,16,128,97,2,step,"));
  EXPECT_THAT(ReadFile(joint_dir / "b.csv"), HasSubstr("\ncpu,32,4,2,8,128,97,2,step,"));
  EXPECT_THAT(ReadFile(joint_dir / "b.csv"), Not(HasSubstr("\ncpu,64,")));
  EXPECT_THAT(joint.out, HasSubstr("profile: " + (joint_dir / "b.csv").string()));
  // With 5 repeats or more each profile says how far its whole steps moved within a row.
  const size_t spread = joint.out.find("whole steps' p10-p90 spread: median ");
  ASSERT_NE(spread, std::string::npos) << joint.out;
  EXPECT_NE(joint.out.find("whole steps' p10-p90 spread: median ", spread + 1), std::string::npos);
  EXPECT_THAT(p.out, Not(HasSubstr("spread")));  // 3 repeats
  const CliResult one_out = Run(two + " --out " + (dir_ / "bad.csv").string());
  EXPECT_EQ(one_out.exit_code, 2);
  EXPECT_THAT(one_out.err, HasSubstr("--out given 1 times for 2 experiments: one per experiment, in their "
                                     "order, or none"));
  const CliResult same = Run(two + " --out " + (dir_ / "bad.csv").string() + " --out " + (dir_ / "." / "bad.csv").string());
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_THAT(same.err, HasSubstr("the profile of both " + exp.string() + " and " + narrow.string()));
  const fs::path sim_exp = Write("sim.yaml", "name: s\nhardware: {gpu: a10}\n" + model);
  const CliResult with_sim = Run("profile " + exp.string() + " " + sim_exp.string() + " --out " +
                                 (dir_ / "bad.csv").string() + " --out " + (dir_ / "bad2.csv").string());
  EXPECT_EQ(with_sim.exit_code, 2);
  EXPECT_THAT(with_sim.err, HasSubstr("profile needs an engine experiment"));
  EXPECT_FALSE(fs::exists(dir_ / "bad.csv"));
  EXPECT_FALSE(fs::exists(dir_ / "bad2.csv"));

  const fs::path fitted = dir_ / "m" / "MODEL.yaml";
  const CliResult c = Run("calibrate " + profile.string() + " --out " + fitted.string() + " --no-plots");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr("whole steps: MAPE"));
  EXPECT_THAT(ReadFile(dir_ / "m" / "calibration.json"), HasSubstr("\"step\""));
  EXPECT_THAT(c.err, Not(HasSubstr("the host moved")));  // 3 repeats: no spread to judge
  // The same profile as if of 15 repeats whose whole steps spread 40% (p10 0.8, p90 1.2
  // times the median): the fit is made, and said to carry the host's moves.
  {
    std::istringstream in(ReadFile(profile));
    std::string line, noisy;
    std::getline(in, line);
    noisy = line + "\n";
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::stringstream split(line);
      for (std::string cell; std::getline(split, cell, ',');) cells.push_back(cell);
      if (cells.size() > 16 && cells[8] == "step") {
        const double median = std::stod(cells[13]);
        cells[14] = std::to_string(0.8 * median);
        cells[15] = std::to_string(1.2 * median);
        cells[16] = "15";
      }
      for (size_t i = 0; i < cells.size(); ++i) noisy += (i > 0 ? "," : "") + cells[i];
      noisy += "\n";
    }
    const fs::path moved = Write("moved.csv", noisy);
    const CliResult n = Run("calibrate " + moved.string() + " --out " + (dir_ / "n" / "M.yaml").string() + " --no-plots");
    ASSERT_EQ(n.exit_code, 0) << n.err;
    EXPECT_THAT(n.err, HasSubstr("moved.csv: its whole steps' p10-p90 spread is a median 40.0% of a row "
                                 "(above 15%): the host moved while it was profiled"));
  }
  // One model shape at TP 1: each GEMM saw one weight matrix, and the fit says so.
  EXPECT_THAT(c.out, HasSubstr("note: GEMMs fitted on fewer than 3 weight sizes: qkv_proj (1), "));
  EXPECT_THAT(ReadFile(dir_ / "m" / "calibration.json"), HasSubstr("\"weight_sizes\": 1"));

  // --evaluate and --hold-out: each evaluated file, and the held-out rows, get an
  // evaluations entry with its file and total MAPE.
  const CliResult held = Run("calibrate " + profile.string() + " --out " + (dir_ / "h" / "M.yaml").string() +
                             " --no-plots --evaluate " + profile.string() + " --hold-out 'tokens>=16'");
  ASSERT_EQ(held.exit_code, 0) << held.err;
  const std::string held_json = ReadFile(dir_ / "h" / "calibration.json");
  EXPECT_THAT(held_json, HasSubstr("\"file\": \"" + profile.string() + " [held out: tokens>=16]\""));
  EXPECT_THAT(held_json, HasSubstr("\"evaluations\": ["));
  EXPECT_THAT(held_json, HasSubstr("\"mape_total\": "));
  // Bad input: exit 2, and what an earlier run wrote stays as it was.
  const std::string before = ReadFile(dir_ / "m" / "calibration.json");
  const std::string bad_profile = Write("broken.csv", ProfileCsvHeader() + "cpu,64,4,2,16,128,97,2,rope,x,1,0,1,1,1,1,3\n").string();
  const std::string unknown_op = Write("unk.csv", ProfileCsvHeader() + "cpu,64,4,2,16,128,97,2,qkv_prj,4,1,0,1,1,1,1,3\n").string();
  // Nine GEMM rows of nine sizes: under the 12 (four a coefficient) its fit needs.
  std::string few_rows = ProfileCsvHeader();
  for (int tokens = 1; tokens <= 9; ++tokens) {
    few_rows += "cpu,64,4,2,16,128,97,2,qkv_proj," + std::to_string(tokens) + "," +
                std::to_string(tokens) + ",0,1," + std::to_string(0.01 * tokens) + ",0,0,3,0,0,0,0,0,0,0,0,0,0\n";
  }
  const std::string too_few = Write("few.csv", few_rows).string();
  struct Bad {
    std::string args, said;
  };
  const std::vector<Bad> bads = {
      {profile.string() + " --out " + (dir_ / "m" / "calibration.json").string(),
       "calibration.json is written beside the model; name the model otherwise"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --hold-out 'context>>5'",
       "--hold-out 'context>>5': expected one of > >= < <= = then a number"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --hold-out 'heads>5'",
       "key 'heads' is not one of: tokens, batch, context, tp"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --hold-out 'context>=0'",
       "--hold-out keeps every row out of the fit"},
      {bad_profile + " --out " + (dir_ / "m" / "MODEL.yaml").string(),
       "broken.csv:2: expected a whole number in [1, 67108864], got 'x', column 'tokens'"},
      {unknown_op + " --out " + (dir_ / "m" / "MODEL.yaml").string(),
       "unk.csv:2: unknown op 'qkv_prj' (did you mean 'qkv_proj'?)"},
      {too_few + " --out " + (dir_ / "m" / "MODEL.yaml").string(),
       "op qkv_proj: 9 measurements of 9 distinct sizes; fitting its 3 coefficients needs at "
       "least 12 measurements"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --routing-skew 5",
       "--routing-skew 5.0: must be in [0, 4]"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --routing-skew 0",
       "--routing-skew: no profile row counted a mixture of experts' routing"},
      // The model written over the profile it is fitted from; over a device.
      {profile.string() + " --out " + profile.string(), ", an input of this command; writing it would replace it"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --evaluate " +
           (dir_ / "m" / "calibration.json").string(),
       "calibration.json: is "},
      {profile.string() + " --out /dev/null", "/dev/null: is not a regular file"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --device zz",
       "--device: device 'zz'"},
      // One file twice, by another path too: weighed twice, or its own rows "evaluated".
      {profile.string() + " " + (profile.parent_path() / "." / profile.filename()).string() +
           " --out " + (dir_ / "m" / "MODEL.yaml").string(),
       "the same file as " + profile.string() + ": its rows would weigh twice in the fit"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --evaluate " + profile.string(),
       ": a fitted profile (its in-sample error is reported already)"},
      {profile.string() + " --out " + (dir_ / "m" / "MODEL.yaml").string() + " --evaluate " + unknown_op +
           " " + unknown_op,
       ": given to --evaluate twice"},
  };
  const std::string profile_text = ReadFile(profile);
  for (const Bad& b : bads) {
    const CliResult r = Run("calibrate " + b.args + " --no-plots");
    EXPECT_EQ(r.exit_code, 2) << b.args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(b.said)) << b.args;
    EXPECT_EQ(ReadFile(dir_ / "m" / "calibration.json"), before) << b.args;
    EXPECT_EQ(ReadFile(profile), profile_text) << b.args;
  }

  // --out naming a folder: MODEL.yaml in it (and the rest beside it), the same model.
  const std::string model_text = ReadFile(fitted);
  fs::create_directories(dir_ / "into");
  for (const std::string& folder : {(dir_ / "into").string(), (dir_ / "new").string() + "/"}) {
    const CliResult into = Run("calibrate " + profile.string() + " --out " + folder + " --no-plots");
    ASSERT_EQ(into.exit_code, 0) << folder << ": " << into.err;
    EXPECT_EQ(ReadFile(fs::path(folder) / "MODEL.yaml"), model_text) << folder;
    EXPECT_THAT(ReadFile(fs::path(folder) / "calibration.json"),
                HasSubstr((fs::path(folder) / "MODEL.yaml").string())) << folder;
    EXPECT_THAT(into.out, HasSubstr("model: " + (fs::path(folder) / "MODEL.yaml").string())) << folder;
  }
  // No --out: results/<the profile's name>/MODEL.yaml under the working folder.
  const std::string by_default = "cd " + dir_.string() + " && " + SERVELAB_BINARY + " calibrate " +
                                 profile.string() + " --no-plots >" + (dir_ / "default.out").string() + " 2>&1";
  ASSERT_EQ(std::system(by_default.c_str()), 0) << ReadFile(dir_ / "default.out");
  EXPECT_EQ(ReadFile(dir_ / "results" / "profile" / "MODEL.yaml"), model_text);
  EXPECT_THAT(ReadFile(dir_ / "default.out"), HasSubstr("model: results/profile/MODEL.yaml"));

  const fs::path out = dir_ / "v";
  const CliResult v = Run("validate " + exp.string() + " --cost-model " + fitted.string() +
                          " --out " + out.string() + " --no-plots");
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_THAT(v.err, HasSubstr("2 loads; BLIS's method validates at three or more"));
  // The sweep varies the arrival rate alone: one engine serves both loads.
  EXPECT_THAT(v.err, HasSubstr("the loads differ only in their requests, policy, sampling or cost model: one engine serves them all"));
  // Its two loads' engine runs and their host checks (before and after each) on one runner.
  EXPECT_THAT(v.err, HasSubstr("servelab validate: 1 engine runner made for 2 loads\n"));
  const std::string table = ReadFile(out / "validation.csv");
  EXPECT_EQ(table.substr(0, table.find('\n')), "load,quantity,statistic,engine,sim,error_pct");
  for (const char* load : {"rate-50", "rate-400"}) {
    EXPECT_THAT(table, HasSubstr(std::string("\n") + load + ",step_time_all,mape,")) << load;
    EXPECT_THAT(table, HasSubstr(std::string("\n") + load + ",ttft,p99,")) << load;
    EXPECT_TRUE(fs::exists(out / load / "engine" / "requests.csv")) << load;
    EXPECT_TRUE(fs::exists(out / load / "sim" / "requests.csv")) << load;
    EXPECT_THAT(ReadFile(out / load / "sim" / "summary.json"),
                HasSubstr("calibrated on cpu"));
    const std::string steps = ReadFile(out / load / "steps_compared.csv");
    EXPECT_EQ(steps.substr(0, steps.find('\n')),
              "tokens,seqs,context_tokens,decode_only,measured_ms,predicted_ms,experts_measured,"
              "experts_predicted,graph_measured,graph_predicted");
    // A dense model: no routing to count; the CPU runner and a cpu model: no graphs.
    EXPECT_NE(steps.find(",,,,\n"), std::string::npos);
    EXPECT_EQ(steps.find('x', steps.find('\n')), std::string::npos);
  }
  EXPECT_THAT(ReadFile(out / "validation.md"), HasSubstr("| metric | rate-50 | rate-400 |"));
  // The replay on the real engine's step times: its schedule and every request's times
  // are the engine's to the nanosecond (clock: virtual; the model samples no stop token:
  // its vocabulary has none).
  for (const char* load : {"rate-50", "rate-400"}) {
    EXPECT_EQ(ReadFile(out / load / "replay" / "requests.csv"), ReadFile(out / load / "engine" / "requests.csv"))
        << load;
    EXPECT_THAT(v.out, HasSubstr(std::string(load) + ": ")) << load;
    // load/replay,schedule,matched,<engine steps>,<replayed as the engine's>,0
    const std::string key = "\n" + std::string(load) + "/replay,schedule,matched,";
    const size_t at = table.find(key);
    ASSERT_NE(at, std::string::npos) << load;
    const std::string row = table.substr(at + key.size(), table.find('\n', at + 1) - at - key.size());
    const std::string steps = row.substr(0, row.find(','));
    EXPECT_EQ(row, steps + "," + steps + ",0") << load;
    EXPECT_GT(std::stoi(steps), 10) << load;
  }
  EXPECT_THAT(v.out, HasSubstr("; replayed on the engine's step times: one (largest error +0.00%)"));
  // The host check: the reference steps timed before and after each load, a row each.
  for (const char* load : {"rate-50", "rate-400"}) {
    for (const char* step : {"prefill-16@0", "decode-4@255", "decode-1@63"}) {
      for (const char* side : {",before:", ",after:"}) {
        EXPECT_THAT(table, HasSubstr(std::string("\n") + load + ",reference_step" + side + step + ","))
            << load << side << step;
      }
    }
  }
  // The reference steps' summed medians, whatever this host's speed: ms to 3 decimals.
  EXPECT_THAT(ReadFile(out / "validation.md"),
              ::testing::ContainsRegex("\\| rate-50 \\| prefill-16@0 decode-4@255 decode-1@63 \\| "
                                       "[0-9]+\\.[0-9][0-9][0-9] \\| [0-9]+\\.[0-9][0-9][0-9] \\|"));
  EXPECT_THAT(v.out, HasSubstr("; host drift "));

  // Any drift at all (--max-drift 0: timings never repeat to the nanosecond) re-runs each
  // load once; the last run is kept and counted. Without the check, no reference rows.
  const CliResult again = Run("validate " + exp.string() + " --cost-model " + fitted.string() +
                              " --out " + (dir_ / "v2").string() +
                              " --no-plots --retries 1 --max-drift 0 --set workload.num_requests=3");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("rate-50: the host drifted during the run: a reference step by "));
  EXPECT_THAT(again.err, HasSubstr("; running it again"));
  // With --max-drift 0 any error on the reference steps before the run is more than it.
  EXPECT_THAT(again.err, HasSubstr("servelab validate: note: rate-50: before the run the simulator was "));
  EXPECT_THAT(again.err, HasSubstr("off the engine's reference steps (more than --max-drift 0.00%)"));
  EXPECT_THAT(again.err, HasSubstr("; keeping it (no retries left)"));
  EXPECT_THAT(again.out, HasSubstr("(run 2)"));
  EXPECT_THAT(ReadFile(dir_ / "v2" / "validation.md"), HasSubstr("the last run kept, runs: rate-50 2, rate-400 2.\n"));
  EXPECT_THAT(ReadFile(dir_ / "v2" / "validation.csv"), HasSubstr("\nrate-400,attempts,runs,2,,\n"));
  // --max-wander 0 over stretches of 2 decode steps: any two stretches' mean errors that
  // differ at all (timings never repeat to the nanosecond) re-run the load, with or
  // without the host check.
  const CliResult wandered = Run("validate " + exp.string() + " --cost-model " + fitted.string() + " --out " +
                                 (dir_ / "v5").string() + " --no-plots --no-host-check --retries 1 "
                                 "--max-wander 0 --wander-window 2 --set workload.num_requests=3");
  ASSERT_EQ(wandered.exit_code, 0) << wandered.err;
  EXPECT_THAT(wandered.err, HasSubstr("rate-50: the decode steps' error wandered during the run: its means over "));
  EXPECT_THAT(wandered.err, HasSubstr(" stretches of 2 steps span "));
  EXPECT_THAT(wandered.err, HasSubstr("more than --max-wander 0.0); running it again"));
  EXPECT_THAT(wandered.err, HasSubstr("; keeping it (no retries left)"));
  EXPECT_THAT(wandered.out, HasSubstr("(run 2)"));
  EXPECT_THAT(wandered.out, Not(HasSubstr("; host drift ")));
  EXPECT_THAT(ReadFile(dir_ / "v5" / "validation.md"), HasSubstr("over stretches of 2 (at a steady load"));
  EXPECT_THAT(ReadFile(dir_ / "v5" / "validation.csv"), HasSubstr("\nrate-50,attempts,runs,2,,\n"));
  // --engine-runs 2: each load's engine again, in <load>/run-2 (no simulated run of its
  // own), with rows of its own and the run-to-run table; a later validation with one run
  // removes the folder.
  const std::string v3 = "validate " + exp.string() + " --cost-model " + fitted.string() + " --out " +
                         (dir_ / "v3").string() + " --no-plots --no-host-check --set workload.num_requests=3";
  const CliResult unchecked = Run(v3 + " --engine-runs 2");
  ASSERT_EQ(unchecked.exit_code, 0) << unchecked.err;
  EXPECT_THAT(ReadFile(dir_ / "v3" / "validation.csv"), Not(HasSubstr("reference_step")));
  EXPECT_THAT(unchecked.out, Not(HasSubstr("host drift")));
  EXPECT_THAT(unchecked.out, HasSubstr("rate-400/run-2: "));
  EXPECT_THAT(unchecked.err, HasSubstr("servelab validate: 1 engine runner made for 2 loads\n"));
  EXPECT_THAT(unchecked.out, HasSubstr("; the engine's E2E p50 "));
  for (const char* load : {"rate-50", "rate-400"}) {
    EXPECT_TRUE(fs::exists(dir_ / "v3" / load / "run-2" / "engine" / "requests.csv")) << load;
    EXPECT_TRUE(fs::exists(dir_ / "v3" / load / "run-2" / "steps_compared.csv")) << load;
    EXPECT_FALSE(fs::exists(dir_ / "v3" / load / "run-2" / "sim")) << load;
    EXPECT_THAT(ReadFile(dir_ / "v3" / "validation.csv"), HasSubstr("\n" + std::string(load) + "/run-2,ttft,p50,"));
    EXPECT_THAT(ReadFile(dir_ / "v3" / "validation.csv"), HasSubstr("\n" + std::string(load) + "/mean,e2e,p99,"));
  }
  EXPECT_THAT(ReadFile(dir_ / "v3" / "validation.md"), HasSubstr("| metric | rate-50/run-2 | rate-400/run-2 |"));
  // The first engine run's pool, pinned for every later run: its block count in the
  // resolved config of the first load's second run and of the second load.
  const std::string first_summary = ReadFile(dir_ / "v3" / "rate-50" / "engine" / "summary.json");
  const size_t blocks_at = first_summary.find("\"kv_blocks_per_replica\": ");
  ASSERT_NE(blocks_at, std::string::npos);
  const int64_t first_blocks = std::stoll(first_summary.substr(blocks_at + 25));
  EXPECT_GT(first_blocks, 0);
  for (const fs::path& later : {dir_ / "v3" / "rate-50" / "run-2" / "engine", dir_ / "v3" / "rate-400" / "engine"}) {
    EXPECT_THAT(ReadFile(later / "config.resolved.yaml"),
                HasSubstr("num_gpu_blocks: " + std::to_string(first_blocks) + "\n")) << later;
  }
  // The experiment swept over `axis` in place of the rate, validated into `out`.
  const auto validate_swept = [&](const std::string& axis, const std::string& out) {
    std::string text = ReadFile(exp);
    text.replace(text.find("workload.arrival.rate: [50, 400]"), 32, axis);
    return Run("validate " + Write(out + ".yaml", text).string() + " --cost-model " + fitted.string() +
               " --out " + (dir_ / out).string() + " --no-plots --no-host-check --set workload.num_requests=3");
  };
  // A sweep of anything else may change the engine: each load has its own.
  const CliResult seqs = validate_swept("scheduler.max_num_seqs: [2, 4]", "v6");
  ASSERT_EQ(seqs.exit_code, 0) << seqs.err;
  EXPECT_THAT(seqs.out, HasSubstr("max_num_seqs-4: "));
  EXPECT_THAT(seqs.err, Not(HasSubstr("one engine serves them all")));
  EXPECT_THAT(seqs.err, HasSubstr("servelab validate: 2 engine runners made for 2 loads\n"));
  // A comparison of policies leaves the runner as it is: one engine serves both.
  const CliResult policies = validate_swept("scheduler.policy: [fcfs, sjf]", "v7");
  ASSERT_EQ(policies.exit_code, 0) << policies.err;
  EXPECT_THAT(policies.out, HasSubstr("policy-sjf: "));
  EXPECT_THAT(policies.err, HasSubstr("the loads differ only in their requests, policy, sampling or cost model: "
                                      "one engine serves them all"));
  EXPECT_THAT(policies.err, HasSubstr("servelab validate: 1 engine runner made for 2 loads\n"));
  const CliResult once = Run(v3);
  ASSERT_EQ(once.exit_code, 0) << once.err;
  // On a wall clock the host's time between steps passes too: the replay's steps start
  // at other times than the engine's (or, when that changed a batch, the schedules part).
  const CliResult wall = Run("validate " + exp.string() + " --cost-model " + fitted.string() + " --out " +
                             (dir_ / "v4").string() + " --no-plots --no-host-check --set workload.num_requests=3"
                             " --set engine.clock=wall");
  ASSERT_EQ(wall.exit_code, 0) << wall.err;
  EXPECT_THAT(wall.out, HasSubstr("; replayed on the engine's step times: "));
  EXPECT_THAT(wall.out, Not(HasSubstr("; replayed on the engine's step times: one ")));
  EXPECT_FALSE(fs::exists(dir_ / "v3" / "rate-50" / "run-2"));
  EXPECT_THAT(ReadFile(dir_ / "v3" / "validation.md"), Not(HasSubstr("Run to run")));
  for (const char* bad : {" --retries 11", " --retries -1", " --max-drift -1", " --max-drift 101",
                           " --settle-ms -1", " --settle-ms 60001", " --engine-runs 0", " --engine-runs 11",
                          " --max-wander -1", " --max-wander 101", " --wander-window 1",
                          " --wander-window 100001"}) {
    const CliResult r = Run("validate " + exp.string() + " --out " + (dir_ / "x").string() + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    const std::string flag = std::string(bad).substr(1, std::string(bad).find(' ', 1) - 1);
    EXPECT_THAT(r.err, HasSubstr(flag)) << bad;
    EXPECT_THAT(r.err, HasSubstr("must be in [")) << bad;  // the range check's, not a parse error's
  }
  // --set cost_model.KEY applies to the --cost-model's model (it is not lost under it).
  const CliResult keyed = Run("validate " + exp.string() + " --cost-model " + fitted.string() + " --out " +
                              (dir_ / "x").string() + " --set cost_model.bogus=1");
  EXPECT_EQ(keyed.exit_code, 2);
  EXPECT_THAT(keyed.err, HasSubstr("bogus"));
  const CliResult both = Run("validate " + exp.string() + " --out " + (dir_ / "x").string() +
                             " --retries 1 --no-host-check");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("it cannot go with --no-host-check"));

  // Bad input: a simulator experiment, a missing model file.
  const CliResult sim = Run("validate " + exp.string() + " --set backend=sim --out " +
                            (dir_ / "x").string());
  EXPECT_EQ(sim.exit_code, 2);
  EXPECT_THAT(sim.err, HasSubstr("set backend: engine"));
  const CliResult missing = Run("validate " + exp.string() + " --cost-model " +
                                (dir_ / "none.yaml").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("none.yaml: not a readable file"));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // The engine's model missing: found where the host check first loads it, or, without
  // the check, where the run does; bad input either way, and nothing written.
  for (const char* check : {"", " --no-host-check"}) {
    const CliResult absent = Run("validate " + exp.string() + " --out " + (dir_ / "x").string() +
                                 " --set engine.model_path=absent --set engine.create_model=false" + check);
    EXPECT_EQ(absent.exit_code, 2) << check << ": " << absent.err;
    EXPECT_THAT(absent.err, HasSubstr("engine.model_path")) << check;
    // (The run's folders may have been made; no file is in them.)
    if (fs::exists(dir_ / "x")) {
      for (const auto& e : fs::recursive_directory_iterator(dir_ / "x")) {
        EXPECT_TRUE(e.is_directory()) << check << ": " << e.path();
      }
    }
  }
}

}  // namespace
}  // namespace servelab
