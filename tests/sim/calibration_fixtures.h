#pragma once
// What the calibration tests share: a known op fit to generate and recover, and small
// mixture-of-experts shapes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/op.h"
#include "driver/model_catalog.h"
#include "driver/profile_table.h"
#include "sim/calibration.h"
#include "sim/model_file.h"

namespace servelab::testing {

// An op's fit with the given fixed cost (us) and memory and compute efficiencies.
inline OpFit Truth(Op op, double fixed_us, double memory, double compute) {
  OpFit f;
  f.op = op;
  f.fixed_us = fixed_us;
  f.memory_efficiency = memory;
  f.compute_efficiency = compute;
  return f;
}

// Mixtral's layout (8 experts, 2 a token) at hidden 256, 4 heads of 64, 2 KV heads.
inline ModelSpec SmallMixtral() {
  ModelSpec m = *FindModel("mixtral-8x7b");
  m.hidden_size = 256;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  return m;
}

// servelab's decode kernel's grid model (paged_decode_grid.h) the tests recover and price:
// per token walked, the reduce and its partitions, a fixed cost, a sequence's row and the
// bytes, with 4 blocks an SM.
inline OpFit DecodeGridTruth() {
  OpFit f;
  f.op = Op::kAttentionDecode;
  f.additive = true;
  f.fixed_us = 7.0;
  f.memory_efficiency = 1.5;
  f.compute_efficiency = std::numeric_limits<double>::infinity();
  f.per_row_us = 0.03;
  f.per_cta_token_us = 0.08;
  f.reduce_us = 4.0;
  f.per_partition_us = 0.1;
  f.resident_ctas = 4;
  return f;
}

// A model of `device` in which every op is fitted and free (infinite efficiencies, no fixed
// cost): a test sets the ops it prices by hand.
inline CalibratedModel FreeOpsModel(const std::string& device) {
  CalibratedModel model;
  model.device = device;
  const double inf = std::numeric_limits<double>::infinity();
  for (const OpInfo& info : AllOps()) {
    OpFit f;
    f.op = info.op;
    f.memory_efficiency = f.compute_efficiency = f.causal_efficiency = inf;
    model.ops[info.op] = f;
  }
  return model;
}

// `text` written to a temporary MODEL.yaml (named after `tag`) and read back.
inline StatusOr<CalibratedModel> ReadModelText(const std::string& text, const std::string& tag) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("servelab_" + tag + "_" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  std::ofstream(path) << text;
  auto model = ReadCalibratedModel(path);
  std::filesystem::remove(path);
  return model;
}

// The decode configurations `servelab profile` measured on the H200 (run 4: batches 1 to
// 128, contexts 15 to 4,095), as Llama-3-8B rows of `op` on servelab's CUDA engine (no
// attention backend named), untimed: a test sets each median.
inline std::vector<ProfileRow> H200DecodeRows(const std::string& op) {
  std::vector<ProfileRow> rows;
  for (int64_t batch : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
    for (int64_t context : {15, 63, 255, 1023, 4095}) {
      ProfileRow r;
      r.device = "h200-141gb";
      r.shape = *FindModel("llama-3-8b");
      r.op = op;
      r.tokens = r.batch = batch;
      r.context = context;
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace servelab::testing
