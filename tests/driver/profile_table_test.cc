// Reading profiles: servelab's layout and Vidur's two (fixtures written here, in Vidur's
// layout, never copies of the shared data), and malformed files named by line and column.
#include "driver/profile_table.h"

#include "core/read_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace servelab {
namespace {

using ::testing::HasSubstr;

class ProfileTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("servelab_profile_table_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

// Vidur's mlp.csv layout: per op min,max,mean,median,std; then the shape columns.
std::string VidurMlp(const std::string& second_median = "0.0630") {
  std::string header, row1, row2;
  const char* ops[] = {"emb", "attn_pre_proj", "add"};
  for (const char* op : ops) {
    for (const char* stat : {"min", "max", "mean", "median", "std"}) {
      header += std::string("time_stats.") + op + "." + stat + ",";
    }
  }
  header += "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
            "num_tensor_parallel_workers\n";
  row1 = "0.003,0.004,0.0035,0.003,0.0,0.060,0.070,0.065,0.065,0.001,0.002,0.002,0.002,0.002,0.0,"
         "32,32,4096,11008,32768,True,1,1\n";
  row2 = "0.004,0.005,0.0045,0.004,0.0,0.061,0.066,0.063," + second_median +
         ",0.001,0.002,0.003,0.002,0.002,0.0,32,32,4096,11008,32768,True,2,8\n";
  return header + row1 + row2;
}

TEST_F(ProfileTableTest, ReadsVidurMlpWithTheDeviceFromTheFileName) {
  auto t = ReadProfile(Write("vidur_a100_Tiny_mlp.csv", VidurMlp()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->layout, "vidur-mlp");
  ASSERT_EQ(t->rows.size(), 6u);  // 2 lines x 3 ops
  const ProfileRow& qkv = t->rows[1];
  EXPECT_EQ(qkv.device, "a100-80gb");
  EXPECT_EQ(qkv.op, "qkv_proj");
  EXPECT_EQ(qkv.tokens, 1);
  EXPECT_EQ(qkv.tp, 1);
  EXPECT_DOUBLE_EQ(qkv.median_ms, 0.065);
  EXPECT_DOUBLE_EQ(qkv.p10_ms, 0.060);  // Vidur's min
  EXPECT_DOUBLE_EQ(qkv.p90_ms, 0.070);  // and max
  EXPECT_EQ(qkv.shape.hidden_size, 4096);
  EXPECT_EQ(qkv.shape.HeadDim(), 128);
  EXPECT_EQ(qkv.shape.intermediate_size, 11008);
  EXPECT_EQ(t->rows[2].op, "residual_add");
  EXPECT_EQ(t->rows[5].tp, 8);
  EXPECT_EQ(t->rows[5].line, 3);
}

// A configuration measured twice (Vidur's A100 profiles repeat their largest token counts)
// weighs once: one row at the means of its medians and percentiles, the first line.
TEST_F(ProfileTableTest, RepeatedConfigurationsFoldIntoOneRow) {
  std::string text = VidurMlp();
  const size_t first = text.find('\n') + 1, second = text.find('\n', first) + 1;
  const std::string row1 = text.substr(first, second - first);
  // row1 again, its qkv_proj at median 0.075 (min 0.058, max 0.080); then row1 once more.
  std::string again = row1;
  again.replace(again.find("0.060,0.070,0.065,0.065"), 23, "0.058,0.080,0.075,0.075");
  text += again + row1;
  auto t = ReadProfile(Write("vidur_a100_Twice_mlp.csv", text));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 6u);  // still 2 configurations x 3 ops
  EXPECT_EQ(t->merged_rows, 6);   // 2 more lines x 3 ops
  const ProfileRow& qkv = t->rows[1];
  EXPECT_EQ(qkv.op, "qkv_proj");
  EXPECT_EQ(qkv.tokens, 1);
  EXPECT_NEAR(qkv.median_ms, (0.065 + 0.075 + 0.065) / 3, 1e-12);
  EXPECT_NEAR(qkv.p10_ms, (0.060 + 0.058 + 0.060) / 3, 1e-12);  // Vidur's min
  EXPECT_NEAR(qkv.p90_ms, (0.070 + 0.080 + 0.070) / 3, 1e-12);  // and max
  EXPECT_EQ(qkv.line, 2);
  EXPECT_EQ(t->rows[5].tp, 8);  // the other configuration untouched
  EXPECT_EQ(t->rows[5].line, 3);
  // Another TP degree of the same sizes is another configuration.
  auto once = ReadProfile(Write("vidur_a100_Once_mlp.csv", VidurMlp()));
  ASSERT_TRUE(once.ok()) << once.status().message();
  EXPECT_EQ(once->merged_rows, 0);
}

// Each of Vidur's ten MLP-file ops maps to servelab's by its column's name, wherever the
// column stands: the header below lists them out of Vidur's order, each with a median of
// its own, so a swapped pair (up and down projections, the two norms) shows.
TEST_F(ProfileTableTest, EveryVidurMlpOpMapsByItsColumnName) {
  const std::vector<std::pair<std::string, std::string>> ops = {
      {"mlp_down_proj", "down_proj"},       {"emb", "embedding"},
      {"post_attention_layernorm", "post_attention_norm"},
      {"attn_rope", "rope"},                {"mlp_up_proj", "gate_up_proj"},
      {"add", "residual_add"},              {"input_layernorm", "input_norm"},
      {"attn_post_proj", "o_proj"},         {"mlp_act", "silu_and_mul"},
      {"attn_pre_proj", "qkv_proj"}};
  std::string header, row;
  for (size_t i = 0; i < ops.size(); ++i) {
    const double median = 0.001 * static_cast<double>(i + 1);
    header += "time_stats." + ops[i].first + ".min,time_stats." + ops[i].first + ".max,time_stats." +
              ops[i].first + ".median,";
    row += std::to_string(median * 0.9) + "," + std::to_string(median * 1.1) + "," +
           std::to_string(median) + ",";
  }
  header += "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
            "num_tensor_parallel_workers\n";
  row += "32,8,4096,14336,128256,True,64,2\n";
  auto t = ReadProfile(Write("vidur_h100_Every_mlp.csv", header + row));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), ops.size());
  std::map<std::string, const ProfileRow*> by_op;
  for (const ProfileRow& r : t->rows) by_op[r.op] = &r;
  ASSERT_EQ(by_op.size(), ops.size()) << "two columns mapped to one op";
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE(ops[i].first);
    ASSERT_TRUE(by_op.count(ops[i].second));
    const ProfileRow& r = *by_op[ops[i].second];
    const double median = 0.001 * static_cast<double>(i + 1);
    EXPECT_NEAR(r.median_ms, median, 1e-9);
    EXPECT_NEAR(r.p10_ms, median * 0.9, 1e-9);
    EXPECT_NEAR(r.p90_ms, median * 1.1, 1e-9);
    EXPECT_EQ(r.device, "h100-80gb");
    EXPECT_EQ(r.tokens, 64);
    EXPECT_EQ(r.tp, 2);
    EXPECT_EQ(r.shape.num_key_value_heads, 8);
    EXPECT_EQ(r.shape.intermediate_size, 14336);
    EXPECT_EQ(r.line, 2);
  }
}

TEST_F(ProfileTableTest, ADeviceMustBeKnown) {
  const std::string path = Write("profile_mlp.csv", VidurMlp());
  auto unnamed = ReadProfile(path);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_THAT(unnamed.status().message(), HasSubstr("pass --device"));
  auto given = ReadProfile(path, "h100-80gb");
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(given->rows[0].device, "h100-80gb");
}

TEST_F(ProfileTableTest, ReadsVidurAttention) {
  const std::string header =
      "time_stats.attn_decode.min,time_stats.attn_decode.max,time_stats.attn_decode.mean,"
      "time_stats.attn_decode.median,time_stats.attn_decode.std,time_stats.attn_prefill.min,"
      "time_stats.attn_prefill.max,time_stats.attn_prefill.mean,time_stats.attn_prefill.median,"
      "time_stats.attn_prefill.std,n_embd,n_q_head,n_kv_head,block_size,"
      "num_tensor_parallel_workers,max_model_len,batch_size,prefill_chunk_size,kv_cache_size,"
      "is_prefill,attention_backend,profile_method\n";
  const std::string text = header +
      "0.014,0.016,0.015,0.015,0.0,,,,,,8192,64,8,16,2,4096,4,0,512,False,FA,KINETO\n"
      ",,,,,0.2,0.3,0.25,0.25,0.0,8192,64,8,16,2,4096,1,1024,256,True,FA,KINETO\n";
  auto t = ReadProfile(Write("vidur_a100_attention.csv", text));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].op, "attention_decode");
  EXPECT_EQ(t->rows[0].batch, 4);
  EXPECT_EQ(t->rows[0].tokens, 4);
  EXPECT_EQ(t->rows[0].context, 512);
  EXPECT_EQ(t->rows[0].shape.num_key_value_heads, 8);
  EXPECT_EQ(t->rows[0].kv_capacity, 4096);  // max_model_len: the KV the kernel was given
  EXPECT_EQ(t->rows[0].attention_backend, "FA");
  EXPECT_EQ(t->rows[1].op, "attention_prefill");
  EXPECT_EQ(t->rows[1].tokens, 1024);
  EXPECT_EQ(t->rows[1].context, 256);
  EXPECT_DOUBLE_EQ(t->rows[1].median_ms, 0.25);
}

// The columns Vidur's attention files have besides their two ops' (the reshapes around
// the kernel, which servelab does not model, come first) and its enums' spelling: the
// backend decides whether the split-KV form may fit the decode rows (sim/calibration.cc).
TEST_F(ProfileTableTest, ReadsVidurAttentionAsVidurWritesIt) {
  std::string header;
  for (const char* op : {"attn_input_reshape", "attn_decode", "attn_prefill", "attn_output_reshape"}) {
    for (const char* stat : {"min", "max", "mean", "median", "std"}) {
      header += std::string("time_stats.") + op + "." + stat + ",";
    }
  }
  header += "n_embd,n_q_head,n_kv_head,block_size,num_tensor_parallel_workers,max_model_len,"
            "batch_size,prefill_chunk_size,kv_cache_size,is_prefill,attention_backend,"
            "profile_method\n";
  const std::string text = header +
      "0.001,0.002,0.0015,0.0015,0.0,0.020,0.024,0.022,0.021,0.001,,,,,,0.003,0.004,0.0035,"
      "0.0035,0.0,8192,64,8,16,4,4096,8,0,1024,False,AttentionBackend.FLASH_ATTENTION,"
      "ProfileMethod.KINETO\n"
      "0.001,0.002,0.0015,0.0015,0.0,,,,,,0.30,0.36,0.33,0.32,0.01,0.003,0.004,0.0035,"
      "0.0035,0.0,8192,64,8,16,4,4096,1,512,128,True,AttentionBackend.FLASH_ATTENTION,"
      "ProfileMethod.KINETO\n";
  auto t = ReadProfile(Write("vidur_a100_Big_attention.csv", text));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);  // the reshapes are not rows
  const ProfileRow& decode = t->rows[0];
  EXPECT_EQ(decode.op, "attention_decode");
  EXPECT_EQ(decode.device, "a100-80gb");
  EXPECT_EQ(decode.tp, 4);
  EXPECT_EQ(decode.batch, 8);
  EXPECT_EQ(decode.context, 1024);
  EXPECT_DOUBLE_EQ(decode.median_ms, 0.021);
  EXPECT_DOUBLE_EQ(decode.p10_ms, 0.020);  // Vidur's min
  EXPECT_DOUBLE_EQ(decode.p90_ms, 0.024);  // and max
  EXPECT_THAT(decode.attention_backend, HasSubstr("FLASH_ATTENTION"));
  const ProfileRow& prefill = t->rows[1];
  EXPECT_EQ(prefill.op, "attention_prefill");
  EXPECT_EQ(prefill.tp, 4);
  EXPECT_EQ(prefill.tokens, 512);
  EXPECT_EQ(prefill.context, 128);
  EXPECT_DOUBLE_EQ(prefill.median_ms, 0.32);
  EXPECT_EQ(prefill.line, 3);
}

// max_model_len is optional (0: the kernel saw the context), and must be a count.
TEST_F(ProfileTableTest, VidurAttentionsMaxModelLenIsOptionalAndChecked) {
  const std::string header =
      "time_stats.attn_decode.min,time_stats.attn_decode.max,time_stats.attn_decode.median,"
      "time_stats.attn_prefill.min,time_stats.attn_prefill.max,time_stats.attn_prefill.median,"
      "n_embd,n_q_head,n_kv_head,num_tensor_parallel_workers,batch_size,prefill_chunk_size,"
      "kv_cache_size,is_prefill";
  auto without = ReadProfile(Write("vidur_a100_attention.csv",
                                   header + "\n0.014,0.016,0.015,,,,8192,64,8,2,4,0,512,False\n"));
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_EQ(without->rows[0].kv_capacity, 0);
  auto bad = ReadProfile(
      Write("vidur_a100_attention.csv",
            header + ",max_model_len\n0.014,0.016,0.015,,,,8192,64,8,2,4,0,512,False,-3\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("vidur_a100_attention.csv:2:"));
  EXPECT_THAT(bad.status().message(), HasSubstr("max_model_len"));
}

// A CPU profile row of a small dense model's shape, for `op`.
ProfileRow CpuRow(const std::string& op) {
  ProfileRow r;
  r.device = "cpu";
  r.shape.hidden_size = 256;
  r.shape.num_attention_heads = 4;
  r.shape.num_key_value_heads = 2;
  r.shape.intermediate_size = 704;
  r.shape.vocab_size = 8000;
  r.shape.num_hidden_layers = 4;
  r.op = op;
  return r;
}

TEST_F(ProfileTableTest, ServelabLayoutRoundTrips) {
  ProfileRow r = CpuRow("attention_decode");
  r.tokens = 8;
  r.batch = 8;
  r.context = 300;
  r.median_ms = 1.25;
  r.p10_ms = 1.0;
  r.p90_ms = 1.5;
  r.repeats = 9;
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  WriteProfileRow(csv, r);
  auto t = ReadProfile(Write("p.csv", csv.str()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->layout, "servelab");
  ASSERT_EQ(t->rows.size(), 1u);
  const ProfileRow& b = t->rows[0];
  EXPECT_EQ(b.device, "cpu");
  EXPECT_EQ(b.shape.HeadDim(), 64);
  EXPECT_EQ(b.shape.num_hidden_layers, 4);
  EXPECT_EQ(b.op, "attention_decode");
  EXPECT_EQ(b.context, 300);
  EXPECT_DOUBLE_EQ(b.median_ms, 1.25);
  EXPECT_EQ(b.repeats, 9);
}

// A mixture of experts' shape travels in the last four columns; a profile without them
// (written before they existed) is of a dense model.
TEST_F(ProfileTableTest, ExpertColumnsRoundTripAndMayBeAbsent) {
  ProfileRow r = CpuRow("moe_mlp");
  r.shape.num_experts = 6;
  r.shape.num_experts_per_tok = 2;
  r.shape.moe_intermediate_size = 320;
  r.shape.shared_expert_intermediate_size = 640;
  r.tokens = 16;
  r.median_ms = 0.5;
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  WriteProfileRow(csv, r);
  EXPECT_THAT(csv.str(),
              HasSubstr(",moe_mlp,16,1,0,1,0.500000,0.000000,0.000000,0,6,2,320,640,0.0000,0.0000,,,0,0\n"));
  auto t = ReadProfile(Write("moe.csv", csv.str()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  const ModelSpec& m = t->rows.at(0).shape;
  EXPECT_EQ(m.num_experts, 6);
  EXPECT_EQ(m.num_experts_per_tok, 2);
  EXPECT_EQ(m.ExpertWidth(), 320);
  EXPECT_EQ(m.shared_expert_intermediate_size, 640);
  auto dense = ReadProfile(Write(
      "old.csv", "device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,vocab_size,"
                 "layers,op,tokens,batch,context,tp,median_ms,p10_ms,p90_ms,repeats\n"
                 "cpu,256,4,2,64,704,8000,4,rope,8,1,0,1,0.01,0.01,0.01,3\n"));
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  EXPECT_FALSE(dense->rows.at(0).shape.IsMoe());
}

TEST_F(ProfileTableTest, ExpertColumnsAreChecked) {
  const std::string row = "cpu,256,4,2,64,704,8000,4,";
  auto picks = ReadProfile(Write("a.csv", ProfileCsvHeader() + row +
                                              "moe_mlp,8,1,0,1,1,1,1,3,4,5,0,0\n"));
  EXPECT_THAT(picks.status().message(),
              HasSubstr("a.csv:2: a token picks 1 to num_experts (4) experts, got 5, column "
                        "'experts_per_token'"));
  auto widths = ReadProfile(Write("b.csv", ProfileCsvHeader() + row +
                                               "rope,8,1,0,1,1,1,1,3,0,0,256,0\n"));
  EXPECT_THAT(widths.status().message(),
              HasSubstr("b.csv:2: expert sizes without experts (num_experts is 0), column "
                        "'num_experts'"));
  auto dense_moe = ReadProfile(Write("c.csv", ProfileCsvHeader() + row +
                                                  "moe_mlp,8,1,0,1,1,1,1,3,0,0,0,0\n"));
  EXPECT_THAT(dense_moe.status().message(),
              HasSubstr("c.csv:2: moe_mlp needs a mixture of experts' shape"));
  auto huge = ReadProfile(Write("d.csv", ProfileCsvHeader() + row +
                                             "moe_mlp,8,1,0,1,1,1,1,3,100000,2,0,0\n"));
  EXPECT_THAT(huge.status().message(),
              HasSubstr("d.csv:2: expected a whole number in [0, 4096], got '100000', column 'num_experts'"));
}

// A moe_mlp row's routing as the engine counted it (the mean experts a MoE layer ran,
// and of them those given one row) round-trips; it is checked against the shape, and
// only a MoE shape's moe_mlp and step rows may carry it.
TEST_F(ProfileTableTest, CountedRoutingRoundTripsAndIsChecked) {
  ProfileRow r = CpuRow("moe_mlp");
  r.shape.num_experts = 8;
  r.shape.num_experts_per_tok = 2;
  r.tokens = 6;
  r.experts_run = 5.5;
  r.single_row_experts = 1.25;
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  WriteProfileRow(csv, r);
  EXPECT_THAT(csv.str(), HasSubstr(",8,2,0,0,5.5000,1.2500,,,0,0\n"));
  auto t = ReadProfile(Write("moe.csv", csv.str()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->rows.at(0).experts_run, 5.5);
  EXPECT_DOUBLE_EQ(t->rows.at(0).single_row_experts, 1.25);
  const std::string row = "cpu,256,4,2,64,704,8000,4,";
  auto too_many = ReadProfile(Write("a.csv", ProfileCsvHeader() + row +
                                                 "moe_mlp,8,1,0,1,1,1,1,3,8,2,0,0,9,0\n"));
  EXPECT_THAT(too_many.status().message(),
              HasSubstr("a.csv:2: a MoE layer runs 1 to num_experts (8) experts, or 0 when not "
                        "counted, column 'experts_run'"));
  auto single = ReadProfile(Write("b.csv", ProfileCsvHeader() + row +
                                               "moe_mlp,8,1,0,1,1,1,1,3,8,2,0,0,3,4\n"));
  EXPECT_THAT(single.status().message(),
              HasSubstr("b.csv:2: 0 to experts_run of the experts run are given one row, "
                        "column 'single_row_experts'"));
  auto dense = ReadProfile(Write("c.csv", ProfileCsvHeader() + row +
                                              "rope,8,1,0,1,1,1,1,3,0,0,0,0,2,0\n"));
  EXPECT_THAT(dense.status().message(),
              HasSubstr("c.csv:2: experts counted on a row that is not a MoE shape's moe_mlp "
                        "or step, column 'experts_run'"));
  auto nan = ReadProfile(Write("d.csv", ProfileCsvHeader() + row +
                                            "moe_mlp,8,1,0,1,1,1,1,3,8,2,0,0,nan,0\n"));
  EXPECT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("column 'experts_run'"));
}

// How the runner ran a whole step: a decode step replayed as a CUDA graph (its rows and
// context bucket), run op by op (0 and 0), or not recorded (empty cells, absent columns).
TEST_F(ProfileTableTest, AStepsGraphRoundTripsAndIsChecked) {
  ProfileRow r = CpuRow("step");
  r.device = "h200-141gb";
  r.tokens = r.batch = 100;
  r.context = 700;
  r.graph_rows = 100;      // max_num_seqs 100: a graph of its own
  r.graph_context = 1000;  // the context served caps the bucket
  ProfileRow eager = r;
  eager.graph_rows = eager.graph_context = 0;
  ProfileRow unknown = r;
  unknown.graph_rows = unknown.graph_context = ProfileRow::kNotRecorded;
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  for (const ProfileRow& row : {r, eager, unknown}) WriteProfileRow(csv, row);
  EXPECT_THAT(csv.str(), HasSubstr(",0.0000,0.0000,100,1000,0,0\n"));
  EXPECT_THAT(csv.str(), HasSubstr(",0.0000,0.0000,0,0,0,0\n"));
  EXPECT_THAT(csv.str(), HasSubstr(",0.0000,0.0000,,,0,0\n"));
  auto t = ReadProfile(Write("g.csv", csv.str()));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 3u);  // how a step ran is part of what was measured: no merge
  EXPECT_EQ(t->rows[0].graph_rows, 100);
  EXPECT_EQ(t->rows[0].graph_context, 1000);
  EXPECT_TRUE(t->rows[1].GraphRecorded());
  EXPECT_EQ(t->rows[1].graph_rows, 0);
  EXPECT_FALSE(t->rows[2].GraphRecorded());
  const std::string head = "h200-141gb,256,4,2,64,704,8000,4,";
  const std::string routing = ",1,1,1,1,3,0,0,0,0,0,0,";  // tp, times, repeats, experts, routing
  auto error = [&](const std::string& name, const std::string& line) {
    auto bad = ReadProfile(Write(name, ProfileCsvHeader() + head + line + ",0,0\n"));
    return bad.ok() ? std::string("read") : bad.status().message();
  };
  EXPECT_THAT(error("a.csv", "rope,8,1,0" + routing + "8,512"),
              HasSubstr("a.csv:2: a CUDA graph on a row that is not a GPU's decode step, column 'graph_rows'"));
  EXPECT_THAT(error("b.csv", "step,6,1,0" + routing + "8,512"),  // a prefill chunk
              HasSubstr("b.csv:2: a CUDA graph on a row that is not a GPU's decode step"));
  EXPECT_THAT(error("c.csv", "step,6,6,0" + routing + "4,512"),
              HasSubstr("c.csv:2: a graph of 4 rows for 6 sequences (the runner's: 6 to 8), column 'graph_rows'"));
  EXPECT_THAT(error("c2.csv", "step,6,6,0" + routing + "16,512"),  // more than its rule pads to
              HasSubstr("c2.csv:2: a graph of 16 rows for 6 sequences (the runner's: 6 to 8)"));
  EXPECT_THAT(error("d.csv", "step,6,6,511" + routing + "8,511"),
              HasSubstr("d.csv:2: a context bucket of 511 for context 511 and the new token (the runner's: "
                        "512 to 512), column 'graph_context'"));
  EXPECT_THAT(error("d2.csv", "step,1,1,0" + routing + "1,67108864"),  // past the bucket of its context
              HasSubstr("d2.csv:2: a context bucket of 67108864 for context 0 and the new token (the runner's: "
                        "1 to 512)"));
  EXPECT_EQ(error("d3.csv", "step,6,6,600" + routing + "6,601"), "read");  // both at the runner's caps
  EXPECT_THAT(error("e.csv", "step,6,6,0" + routing + "8,0"),
              HasSubstr("e.csv:2: a graph has rows and a context bucket, or neither (0 and 0: run op by op), "
                        "column 'graph_context'"));
  EXPECT_THAT(error("f.csv", "step,6,6,0" + routing + "8,"), HasSubstr("f.csv:2: expected a whole number"));
  EXPECT_THAT(error("h.csv", "step,6,6,0" + routing + "-8,512"), HasSubstr("column 'graph_rows'"));
  EXPECT_EQ(error("i.csv", "step,6,6,511" + routing + "8,512"), "read");
  auto one_column = ReadProfile(Write("k.csv", "device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,"
                                               "vocab_size,layers,op,tokens,batch,context,tp,median_ms,p10_ms,"
                                               "p90_ms,repeats,graph_rows\n" +
                                               head + "step,6,6,0,1,1,1,1,3,8\n"));
  EXPECT_THAT(one_column.status().message(),
              HasSubstr("k.csv:2: graph_rows and graph_context come together, column 'graph_context'"));
  auto cpu = ReadProfile(Write("j.csv", ProfileCsvHeader() + "cpu,256,4,2,64,704,8000,4,step,6,6,0" + routing +
                                            "8,512,0,0\n"));
  EXPECT_THAT(cpu.status().message(), HasSubstr("j.csv:2: a CUDA graph on a row that is not a GPU's decode step"));
}

// A decode timed k steps after a prefill chunk (kStepAfterPrefill): both columns >= 1 on
// such a row of a decode, both 0 (or absent) on every other row.
TEST_F(ProfileTableTest, AfterPrefillRowsRoundTripAndAreChecked) {
  const std::string head = "cpu,256,4,2,64,704,8000,4,";
  const std::string times = ",1,2,1.9,2.2,15,0,0,0,0,0,0,0,0,";  // tp, times, repeats, experts, routing, graph
  auto t = ReadProfile(Write("ok.csv", ProfileCsvHeader() + head + "step,4,4,63" + times + "0,0\n" + head +
                                           "step_after_prefill,4,4,63" + times + "1,128\n" + head +
                                           "step_after_prefill,4,4,63" + times + "2,128\n"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 3u);  // k is part of the configuration: no merge
  EXPECT_EQ(t->rows[1].op, kStepAfterPrefill);
  EXPECT_EQ(t->rows[1].after_prefill, 1);
  EXPECT_EQ(t->rows[2].after_prefill, 2);
  EXPECT_EQ(t->rows[2].prefill_before, 128);
  std::ostringstream csv;
  csv << ProfileCsvHeader();
  WriteProfileRow(csv, t->rows[2]);
  EXPECT_THAT(csv.str(), HasSubstr(",step_after_prefill,4,4,63,1,2.000000,1.900000,2.200000,15,"));
  EXPECT_THAT(csv.str(), HasSubstr(",0,0,2,128\n"));
  auto error = [&](const std::string& name, const std::string& line) {
    auto bad = ReadProfile(Write(name, ProfileCsvHeader() + head + line + "\n"));
    return bad.ok() ? std::string("read") : bad.status().message();
  };
  EXPECT_THAT(error("a.csv", "step,4,4,63" + times + "1,128"),
              HasSubstr("a.csv:2: after_prefill and prefill_before belong to step_after_prefill rows only, "
                        "column 'after_prefill'"));
  EXPECT_THAT(error("b.csv", "rope,4,1,0" + times + "0,128"), HasSubstr("column 'prefill_before'"));
  EXPECT_THAT(error("c.csv", "step_after_prefill,4,4,63" + times + "0,128"),
              HasSubstr("c.csv:2: a decode step after a prefill chunk: 1 or more, column 'after_prefill'"));
  EXPECT_THAT(error("d.csv", "step_after_prefill,4,4,63" + times + "1,0"),
              HasSubstr("d.csv:2: the chunk before the decodes: 1 token or more, column 'prefill_before'"));
  EXPECT_THAT(error("e.csv", "step_after_prefill,4,4,63" + times + "1001,128"),
              HasSubstr("e.csv:2: expected a whole number in [0, 1000]"));
  EXPECT_THAT(error("f.csv", "step_after_prefill,4,1,63" + times + "1,128"),
              HasSubstr("f.csv:2: a decode step: tokens = batch (one new token a sequence), column 'tokens'"));
  // A profile written before these columns: every row 0 and 0.
  auto old = ReadProfile(Write("old.csv", "device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,"
                                          "vocab_size,layers,op,tokens,batch,context,tp,median_ms,p10_ms,"
                                          "p90_ms,repeats\n" + head + "step,4,4,63,1,2,1.9,2.2,15\n"));
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->rows[0].after_prefill, 0);
}

TEST_F(ProfileTableTest, MalformedFilesNameFileLineAndColumn) {
  auto number = ReadProfile(Write("vidur_a100_bad.csv", VidurMlp("fast")));
  ASSERT_FALSE(number.ok());
  EXPECT_TRUE(number.status().IsBadInput());
  EXPECT_THAT(number.status().message(),
              HasSubstr("vidur_a100_bad.csv:3: expected a number >= 0, got 'fast', column "
                        "'time_stats.attn_pre_proj.median'"));
  auto op = ReadProfile(Write("p.csv", ProfileCsvHeader() +
                                           "cpu,256,4,2,64,704,8000,4,qkv_prj,1,1,0,1,1,1,1,3\n"));
  ASSERT_FALSE(op.ok());
  EXPECT_TRUE(op.status().IsBadInput());
  EXPECT_THAT(op.status().message(),
              HasSubstr("p.csv:2: unknown op 'qkv_prj' (did you mean 'qkv_proj'?)"));
  EXPECT_THAT(op.status().message(), HasSubstr("column 'op'"));
  auto column = ReadProfile(Write("q.csv", "device,op,tokens\ncpu,rope,3\n"));
  EXPECT_THAT(column.status().message(), HasSubstr("q.csv:1: missing column 'hidden_size'"));
  auto short_line = ReadProfile(Write("r.csv", ProfileCsvHeader() + "cpu,256,4\n"));
  EXPECT_THAT(short_line.status().message(), HasSubstr("r.csv:2: missing field"));
  // A field more than the header names: a shifted row, not read as if it fit.
  auto wide = ReadProfile(Write("w.csv", ProfileCsvHeader() +
                                             "cpu,256,4,2,64,704,8000,4,rope,1,1,0,1,1,1,1,3,0,0,0,0,0,0,0,0,0,0,99\n"));
  ASSERT_FALSE(wide.ok());
  EXPECT_TRUE(wide.status().IsBadInput());
  EXPECT_THAT(wide.status().message(), HasSubstr("w.csv:2: 28 fields, more than the header's 27"));
  // Times past 10^7 ms: a fit squares their relative errors (1e308 would be inf).
  auto huge = ReadProfile(Write("h.csv", ProfileCsvHeader() +
                                             "cpu,256,4,2,64,704,8000,4,rope,1,1,0,1,1e308,1,1,3\n"));
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(huge.status().IsBadInput());
  EXPECT_THAT(huge.status().message(),
              HasSubstr("h.csv:2: expected a number <= 10000000, got '1e308', column 'median_ms'"));
  // A profile past its size limit is refused before it is read (a sparse file: no disk).
  const std::string big = Write("big.csv", "");
  std::filesystem::resize_file(big, kMaxProfileFileBytes + 1);
  auto too_big = ReadProfile(big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(too_big.status().IsBadInput());
  EXPECT_THAT(too_big.status().message(), HasSubstr("over the 256 MiB limit"));
  auto empty = ReadProfile(Write("e.csv", ""));
  EXPECT_THAT(empty.status().message(), HasSubstr("empty profile"));
  EXPECT_EQ(ReadProfile((dir_ / "none.csv").string()).status().code(), StatusCode::kNotFound);
  // Counts past the bounds an experiment's own keys have (a decode of 2^31 - 1 sequences
  // would size a vector of them in the fit), and heads that do not divide Vidur's width.
  auto batch = ReadProfile(Write("b.csv", ProfileCsvHeader() +
                                              "cpu,256,4,2,64,704,8000,4,attention_decode,1,"
                                              "2147483647,0,1,1,1,1,3\n"));
  ASSERT_FALSE(batch.ok());
  EXPECT_TRUE(batch.status().IsBadInput());
  EXPECT_THAT(batch.status().message(),
              HasSubstr("b.csv:2: expected a whole number in [1, 1048576], got '2147483647', "
                        "column 'batch'"));
  auto tp = ReadProfile(Write("t.csv", ProfileCsvHeader() + "cpu,256,4,2,64,704,8000,4,rope,1,1,0,65,1,1,1,3\n"));
  EXPECT_THAT(tp.status().message(), HasSubstr("t.csv:2: expected a whole number in [1, 64], got '65', column 'tp'"));
  std::string uneven = VidurMlp();
  uneven.replace(uneven.find(",32,32,4096,"), 12, ",30,32,4096,");
  auto heads = ReadProfile(Write("vidur_a100_uneven.csv", uneven));
  ASSERT_FALSE(heads.ok());
  EXPECT_THAT(heads.status().message(),
              HasSubstr("vidur_a100_uneven.csv:2: the heads (30) do not divide n_embd (4096) into "
                        "whole heads, column 'n_head'"));
}

// The spread of a profile's whole steps, by hand: step rows of 5 repeats or more only,
// each (p90 - p10) / median; rows with no time skipped.
TEST(SpreadOfTest, MedianAndP90OfTheStepRowsSpreads) {
  auto row = [](const std::string& op, double p10, double median, double p90) {
    ProfileRow r;
    r.op = op;
    r.p10_ms = p10;
    r.median_ms = median;
    r.p90_ms = p90;
    r.repeats = 15;
    return r;
  };
  // Spreads 10%, 20%, 40%, 80% (then 5% and 1000% on rows that are not whole steps, a
  // step row of no time, and one of 3 repeats).
  ProfileRow few = row("step", 0, 1, 10);
  few.repeats = 3;
  const std::vector<ProfileRow> rows = {
      row("step", 0.95, 1.0, 1.05), row("step", 1.8, 2.0, 2.2), row("rope", 1, 20, 21),
      row("step", 0.8, 1.0, 1.2),   row("step", 4.0, 5.0, 8.0), row("step", 0, 0, 0),
      row("sampling", 0.01, 0.1, 0.0105), few};
  const ProfileSpread spread = SpreadOf(rows);
  EXPECT_EQ(spread.rows, 4);
  EXPECT_NEAR(spread.median_pct, 30.0, 1e-9);  // between 20 and 40
  EXPECT_NEAR(spread.p90_pct, 68.0, 1e-9);  // rank 0.9 x 3 = 2.7: 40 + 0.7 x (80 - 40)
  EXPECT_GT(spread.median_pct, kNoisyProfileSpreadPct);
  EXPECT_EQ(SpreadOf({}).rows, 0);
  EXPECT_EQ(SpreadOf({}).median_pct, 0);
}

}  // namespace
}  // namespace servelab
