// MODEL.yaml: a calibrated model written reads back to the same coefficients and the
// same text; a bad file's message names its line and key.
#include "sim/model_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using testing::Truth;

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("servelab_model_file_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string path = (dir_ / "m.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

// A model with every part MODEL.yaml has: fitted_from, routing, GEMM corrections, ops.
CalibratedModel SampleModel() {
  OpFit prefill = Truth(Op::kAttentionPrefill, 14.0, 0.8, 0.45);
  prefill.causal_efficiency = 0.2;
  prefill.per_row_us = 0.07;
  prefill.memory_fitted = false;
  prefill.compute_fitted = true;
  CalibratedModel model;
  model.device = "a100-80gb";
  // Profile paths as the shell allows them: quotes, a backslash, a colon, a hash.
  model.fitted_from = {"a.csv", "runs/\"q\" \\ b: #1.csv"};
  model.ops[Op::kAttentionPrefill] = prefill;
  model.ops[Op::kRope] = Truth(Op::kRope, 2.5, 0.49, 0);
  model.ops[Op::kRope].memory_fitted = true;
  model.ops[Op::kRope].cache_bytes = 3.5e7;
  model.ops[Op::kRope].beyond_cache_memory_efficiency = 0.41;
  model.ops[Op::kMoeMlp] = Truth(Op::kMoeMlp, 30.0, 8.5, 21.0);
  model.ops[Op::kMoeMlp].per_expert_us = 41.5;
  CountedRouting routing;
  routing.num_experts = 8;
  routing.experts_per_token = 2;
  routing.hidden_size = 256;
  routing.expert_intermediate_size = 1024;
  routing.routing_skew = 0.96;
  routing.routing_locality = 0.47;
  routing.routing_favourites = 3.8;
  routing.decode_rows = 40;
  routing.chunk_rows = 12;
  CountedRouting served = routing;  // a second shape, its skew given to calibrate
  served.hidden_size = 512;
  served.routing_skew = 0;
  served.skew_given = true;
  model.routing = {routing, served};
  GemmCorrection correction;
  correction.op = Op::kGateUpProj;
  correction.k = 4096;
  correction.n = 22016;
  correction.rows = {1, 64, 136};
  correction.factor = {0.945123, 1.186, 0.955};
  model.gemm_corrections = {correction};
  return model;
}

TEST_F(ModelFileTest, RoundTripsTheCoefficients) {
  const CalibratedModel model = SampleModel();
  const std::string text = CalibratedModelYaml(model, {});
  auto back = ReadCalibratedModel(Write(text));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->device, "a100-80gb");
  EXPECT_EQ(back->fitted_from, model.fitted_from);
  const OpFit& p = back->ops.at(Op::kAttentionPrefill);
  EXPECT_EQ(p.fixed_us, 14.0);
  EXPECT_EQ(p.causal_efficiency, 0.2);
  EXPECT_EQ(p.per_row_us, 0.07);
  EXPECT_FALSE(p.memory_fitted);
  EXPECT_EQ(back->ops.at(Op::kRope).memory_efficiency, 0.49);
  EXPECT_EQ(back->ops.at(Op::kRope).cache_bytes, 3.5e7);
  EXPECT_EQ(back->ops.at(Op::kRope).beyond_cache_memory_efficiency, 0.41);
  EXPECT_EQ(back->ops.at(Op::kMoeMlp).per_expert_us, 41.5);
  ASSERT_EQ(back->routing.size(), 2u);
  EXPECT_FALSE(back->routing[0].skew_given);
  EXPECT_TRUE(back->routing[1].skew_given);
  EXPECT_EQ(back->routing[1].routing_skew, 0.0);
  EXPECT_EQ(back->routing[0].routing_skew, 0.96);
  EXPECT_EQ(back->routing[0].routing_locality, 0.47);
  EXPECT_EQ(back->routing[0].routing_favourites, 3.8);
  EXPECT_EQ(back->routing[0].expert_intermediate_size, 1024);
  EXPECT_EQ(back->routing[0].chunk_rows, 12);
  ASSERT_EQ(back->gemm_corrections.size(), 1u);
  EXPECT_EQ(back->gemm_corrections[0].op, Op::kGateUpProj);
  EXPECT_EQ(back->gemm_corrections[0].n, 22016);
  EXPECT_EQ(back->gemm_corrections[0].rows, model.gemm_corrections[0].rows);
  EXPECT_EQ(back->gemm_corrections[0].factor, model.gemm_corrections[0].factor);
  EXPECT_EQ(CalibratedModelYaml(*back, {}), text);
}

// The standard's truncated model file: calibrate's MODEL.yaml cut anywhere (at a line's
// end, or inside a line) is refused, where a cut between ops or inside an optional key's
// line would otherwise read as a model with fewer terms.
TEST_F(ModelFileTest, AFileCutShortIsRefused) {
  const std::string text = CalibratedModelYaml(SampleModel(), {});
  ASSERT_TRUE(text.ends_with("\ncomplete: true\n"));
  int cuts = 0, missing = 0;
  for (size_t end = 0; end + 1 < text.size(); end = text.find('\n', end + 1)) {
    // At the line's end (its newline kept) and halfway into the next line.
    const size_t next = std::min(text.find('\n', end + 1), text.size());
    for (const size_t cut : {end + 1, end + 1 + (next - end) / 2}) {
      if (cut >= text.size() - 1) continue;
      auto read = ReadCalibratedModel(Write(text.substr(0, cut)));
      ++cuts;
      ASSERT_FALSE(read.ok()) << "cut at byte " << cut << " of " << text.size() << " was read";
      EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
      missing += read.status().message().find(": complete: missing: the file was cut short") !=
                 std::string::npos;
    }
  }
  EXPECT_GT(cuts, 80);
  // Most cuts leave valid YAML: only the missing end says what is wrong.
  EXPECT_GT(missing, cuts / 2);
  const auto lines = std::count(text.begin(), text.end(), '\n');
  const std::string before_end = text.substr(0, text.rfind("complete:"));
  EXPECT_THAT(ReadCalibratedModel(Write(before_end)).status().message(),
              HasSubstr("m.yaml:" + std::to_string(lines - 1) + ": complete: missing"));
  // Its last newline alone may go; `complete: false` is refused; a hand-written model
  // (no header) needs no end.
  EXPECT_TRUE(ReadCalibratedModel(Write(text.substr(0, text.size() - 1))).ok());
  EXPECT_THAT(ReadCalibratedModel(Write(before_end + "complete: false\n")).status().message(),
              HasSubstr("m.yaml:" + std::to_string(lines) + ": complete: false"));
  EXPECT_TRUE(ReadCalibratedModel(Write(before_end.substr(before_end.find('\n', 1) + 1))).ok());
  // An editor's line endings or byte-order mark do not hide the cut.
  std::string crlf;
  for (const char c : before_end) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_THAT(ReadCalibratedModel(Write(crlf)).status().message(), HasSubstr(": complete: missing"));
  EXPECT_THAT(ReadCalibratedModel(Write("\xEF\xBB\xBF" + before_end)).status().message(),
              HasSubstr(": complete: missing"));
  std::string whole_crlf;
  for (const char c : text) whole_crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(ReadCalibratedModel(Write(whole_crlf)).ok());
  // A cut inside a quoted profile name is a YAML error first; it says what it looks like.
  auto quoted = ReadCalibratedModel(Write(text.substr(0, text.find("runs/") + 3)));
  EXPECT_THAT(quoted.status().message(), HasSubstr("YAML"));
  EXPECT_THAT(quoted.status().message(), HasSubstr("the file was cut short"));
}

TEST_F(ModelFileTest, BadFilesNameLineAndKey) {
  auto unknown = ReadCalibratedModel(Write("device: a100-80gb\nops:\n  qkv_prj: {fixed_us: 1}\n"));
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("m.yaml:3: ops.qkv_prj: unknown op 'qkv_prj' (did you mean 'qkv_proj'?)"));
  auto range = ReadCalibratedModel(Write(
      "device: a100-80gb\nops:\n  rope:\n    fixed_us: 1\n    memory_efficiency: -2\n"));
  EXPECT_THAT(range.status().message(), HasSubstr("m.yaml:5: ops.rope.memory_efficiency: value out of range"));
  auto key = ReadCalibratedModel(Write(
      "device: a100-80gb\nops:\n  rope: {fixed_us: 1, memory_efficiency: 1, speed: 3}\n"));
  EXPECT_THAT(key.status().message(), HasSubstr("ops.rope.speed: unknown key 'speed'"));
  auto missing = ReadCalibratedModel(Write("device: a100-80gb\nops:\n  qkv_proj: {fixed_us: 1, memory_efficiency: 1}\n"));
  EXPECT_THAT(missing.status().message(), HasSubstr("ops.qkv_proj.compute_efficiency: missing"));
  auto device = ReadCalibratedModel(Write("device: a101\nops:\n  rope: {fixed_us: 1, memory_efficiency: 1}\n"));
  EXPECT_THAT(device.status().message(), HasSubstr("m.yaml:1: device: device 'a101'"));
  auto experts = ReadCalibratedModel(Write(
      "device: cpu\nops:\n  rope: {fixed_us: 1, memory_efficiency: 1, per_expert_us: 3}\n"));
  EXPECT_THAT(experts.status().message(),
              HasSubstr("m.yaml:3: ops.rope.per_expert_us: only moe_mlp runs experts"));
  const std::string routing =
      "device: cpu\nrouting:\n  - num_experts: 8\n    experts_per_token: 2\n    hidden_size: 256\n"
      "    expert_intermediate_size: 1024\n    routing_skew: 0.5\n";
  const std::string ops = "ops:\n  rope: {fixed_us: 1, memory_efficiency: 1}\n";
  EXPECT_THAT(ReadCalibratedModel(Write(routing + "    routing_locality: 1.5\n" + ops)).status().message(),
              HasSubstr("m.yaml:8: routing[0].routing_locality: value out of range: must be in [0.0, 1.0]"));
  EXPECT_THAT(ReadCalibratedModel(Write(routing + ops)).status().message(),
              HasSubstr("m.yaml:3: routing[0].routing_locality: missing"));
  EXPECT_THAT(ReadCalibratedModel(Write(routing + "    routing_locality: 0\n    skew: 1\n" + ops))
                  .status().message(),
              HasSubstr("m.yaml:9: routing[0].skew: unknown key 'skew'"));
  EXPECT_TRUE(ReadCalibratedModel(Write(routing + "    routing_locality: 0\n" + ops)).ok());
  // A locality needs its favourites: one written before them meant n^(1 - locality) draws.
  EXPECT_THAT(ReadCalibratedModel(Write(routing + "    routing_locality: 0.56\n" + ops)).status().message(),
              HasSubstr("m.yaml:3: routing[0].routing_favourites: missing (a routing_locality "
                        "above 0 needs it; a MODEL.yaml from before the favourites form: "
                        "calibrate it again)"));
  EXPECT_THAT(ReadCalibratedModel(Write(routing + "    routing_locality: 0.5\n    routing_favourites: 0.5\n" + ops))
                  .status().message(),
              HasSubstr("m.yaml:9: routing[0].routing_favourites: value out of range: must be in [1.0, 1024.0]"));
  auto favourites = ReadCalibratedModel(Write(routing + "    routing_locality: 0.5\n    routing_favourites: 7.5\n" + ops));
  ASSERT_TRUE(favourites.ok()) << favourites.status().message();
  EXPECT_EQ(favourites->routing[0].routing_favourites, 7.5);
  const std::string twice = routing + "    routing_locality: 0\n" + routing.substr(routing.find("  - ")) +
                            "    routing_locality: 0.5\n    routing_favourites: 2\n";
  EXPECT_THAT(ReadCalibratedModel(Write(twice + ops)).status().message(),
              HasSubstr("m.yaml:9: routing[1]: the same MoE shape as routing[0]"));
  const std::string gemm = "device: cpu\ngemm_corrections:\n  - op: ";
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "rope\n    k: 1\n    n: 1\n    rows: [1, 2]\n"
                                        "    factor: [1, 1]\n" + ops)).status().message(),
              HasSubstr("m.yaml:3: gemm_corrections[0].op: 'rope' is not a GEMM"));
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "o_proj\n    k: 1\n    n: 1\n    rows: [1, 4, 2]\n"
                                        "    factor: [1, 1, 1]\n" + ops)).status().message(),
              HasSubstr("m.yaml:6: gemm_corrections[0].rows[2]: rows must ascend"));
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "o_proj\n    k: 1\n    n: 1\n    rows: [1, 2]\n"
                                        "    factor: [1]\n" + ops)).status().message(),
              HasSubstr("m.yaml:7: gemm_corrections[0].factor: expected as many numbers as rows (2)"));
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "o_proj\n    k: 1\n    n: 1\n    rows: [1, 2]\n"
                                        "    factor: [1, 0]\n" + ops)).status().message(),
              HasSubstr("gemm_corrections[0].factor[1]: value out of range"));
  // The writer's form: a string of numbers; its items' messages name its line.
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "o_proj\n    k: 1\n    n: 1\n    rows: \"1 2 2.5\"\n"
                                        "    factor: \"1 1 1\"\n" + ops)).status().message(),
              HasSubstr("m.yaml:6: gemm_corrections[0].rows[2]: expected a whole number"));
  EXPECT_THAT(ReadCalibratedModel(Write(gemm + "o_proj\n    k: 1\n    n: 1\n    rows: \"1 2 3\"\n"
                                        "    factor: \"1 1 x\"\n" + ops)).status().message(),
              HasSubstr("m.yaml:7: gemm_corrections[0].factor[2]: expected a number, not 'x'"));
  const std::string once = gemm + "o_proj\n    k: 1\n    n: 1\n    rows: [1, 2]\n    factor: [1, 1]\n";
  EXPECT_TRUE(ReadCalibratedModel(Write(once + ops)).ok());
  EXPECT_THAT(ReadCalibratedModel(Write(once + once.substr(once.find("  - ")) + ops)).status().message(),
              HasSubstr("m.yaml:8: gemm_corrections[1]: the same op and shape as gemm_corrections[0]"));
  // A key given twice anywhere (a hand edit appended below the fit), a second document,
  // a fraction where a count goes, a flag that is neither true nor false.
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nops:\n  rope:\n    fixed_us: 1\n"
                                        "    memory_efficiency: 1\n    fixed_us: 2\n")).status().message(),
              HasSubstr("m.yaml:6: ops.rope.fixed_us: duplicate key (first given at line 4)"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\n" + ops + ops)).status().message(),
              HasSubstr("ops: duplicate key (first given at line 2)"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\n" + ops + "---\ndevice: a100-80gb\n")).status().message(),
              HasSubstr("m.yaml:4: a second YAML document; one calibrated model per file"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nops:\n  qkv_proj: {fixed_us: 1, memory_efficiency: 1, "
                                        "compute_efficiency: 1, row_tile: 2.5}\n")).status().message(),
              HasSubstr("m.yaml:3: ops.qkv_proj.row_tile: expected a whole number"));
  EXPECT_THAT(ReadCalibratedModel(Write(routing + "    routing_locality: 0\n    decode_rows: 7.5\n" + ops))
                  .status().message(),
              HasSubstr("m.yaml:9: routing[0].decode_rows: expected a whole number"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nops:\n  rope: {fixed_us: 1, memory_efficiency: 1, "
                                        "memory_fitted: maybe}\n")).status().message(),
              HasSubstr("m.yaml:3: ops.rope.memory_fitted: expected true or false"));
  // What is said, not used, is still checked: the profiles as a list of names, the
  // in-sample error as a percentage.
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nfitted_from: a.csv\n" + ops)).status().message(),
              HasSubstr("m.yaml:2: fitted_from: expected a list of profile files"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nfitted_from:\n  - {a: 1}\n" + ops)).status().message(),
              HasSubstr("m.yaml:3: fitted_from[0]: expected a file name"));
  EXPECT_THAT(ReadCalibratedModel(Write("device: cpu\nops:\n  rope: {fixed_us: 1, memory_efficiency: 1, "
                                        "in_sample_mape_pct: -3}\n")).status().message(),
              HasSubstr("m.yaml:3: ops.rope.in_sample_mape_pct: value out of range"));
  EXPECT_TRUE(ReadCalibratedModel(Write("device: cpu\nfitted_from: [a.csv]\nops:\n  rope: {fixed_us: 1, "
                                        "memory_efficiency: 1, in_sample_mape_pct: 2.5}\n")).ok());
  auto syntax = ReadCalibratedModel(Write("device: [a100\n"));
  EXPECT_THAT(syntax.status().message(), HasSubstr("YAML syntax error"));
  EXPECT_EQ(ReadCalibratedModel((dir_ / "none.yaml").string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace servelab
