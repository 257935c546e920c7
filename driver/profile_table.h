#pragma once
// Measured op times, one row per (op, sizes): what `servelab profile` writes and
// `servelab calibrate` fits. Three layouts are read, told apart by their header:
//
//   servelab  CSV  device,hidden_size,num_heads,num_kv_heads,head_dim,intermediate_size,
//                  vocab_size,layers,op,tokens,batch,context,tp,median_ms,p10_ms,p90_ms,
//                  repeats,num_experts,experts_per_token,expert_intermediate_size,
//                  shared_expert_intermediate_size,experts_run,single_row_experts,
//                  graph_rows,graph_context
//             (the four after repeats, a mixture of experts' shape, may be absent: a dense
//             model; an expert width of 0 is intermediate_size; the two after them, a
//             moe_mlp or step row's routing as it happened, the mean over the step's MoE
//             layers of the experts run and of those given one row, may be absent or 0:
//             not counted; the last two, how the runner ran a whole step: a decode step
//             replayed as a CUDA graph, the graph's rows and context bucket, else 0 and 0;
//             absent or empty: not recorded), then after_prefill,prefill_before (absent: 0)
//             device: a catalog GPU ("a100-80gb") or "cpu"; op: an op of core/op.h, "step" (a
//             whole step) or "step_after_prefill": a whole decode step timed after_prefill
//             decode steps after a prefill chunk of prefill_before tokens (1: the first
//             decode after it; kStepAfterPrefill below); times per layer (per-layer ops) or
//             per step, per GPU.
//             A decode row has tokens = batch sequences of one new token after `context`
//             cached ones each; any other row is one sequence's chunk of `tokens` after
//             `context` (its prefill). `layers` matters for step rows only.
//   vidur mlp CSV  Vidur's data/profiling/compute/<gpu>/<model>/mlp.csv: one row per
//             (num_tokens, num_tensor_parallel_workers) with time_stats.<op>.median for
//             emb, input_layernorm, attn_pre_proj, attn_rope, attn_post_proj,
//             post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add
//             (read as embedding, input_norm, qkv_proj, rope, o_proj, post_attention_norm,
//             gate_up_proj, silu_and_mul, down_proj, residual_add); p10/p90 are its min and
//             max (it has no percentiles).
//   vidur attention CSV  Vidur's attention.csv: time_stats.attn_decode.median (batch_size
//             sequences, kv_cache_size cached tokens each, one new token) and
//             time_stats.attn_prefill.median (one chunk of prefill_chunk_size tokens after
//             kv_cache_size cached ones), as attention_decode / attention_prefill;
//             max_model_len and attention_backend, when present, as the rows'
//             kv_capacity and attention_backend.
// Vidur's files do not name their GPU: it comes from `device`, else from a catalog name in
// the file name ("vidur_a100_..." -> a100-80gb).
//
// A malformed file is an InvalidArgument "path:LINE: what, column 'X'".
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace servelab {

struct ProfileRow {
  std::string device;
  ModelSpec shape;  // hidden_size, heads, kv heads, head_dim, intermediate_size, vocab_size,
                    // num_hidden_layers; experts, per token, their widths
  std::string op;   // an OpInfo name, or "step"
  int64_t tokens = 0;
  int64_t batch = 1;
  int64_t context = 0;
  int32_t tp = 1;
  // Decode attention: the KV length the kernel was launched for, when the profiler
  // allocated more than the context (Vidur's max_model_len); 0: the context's.
  int64_t kv_capacity = 0;
  // Attention rows: the kernel library that ran them, when the file says (Vidur's
  // attention_backend, e.g. "AttentionBackend.FLASH_ATTENTION"); "" otherwise.
  std::string attention_backend;
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  int32_t repeats = 0;
  // moe_mlp and step: the experts a MoE layer ran, and of them those given one row,
  // the mean over the step's MoE layers (the engine's routing, which a fit then uses
  // instead of uniform routing's expectation); 0: not counted.
  double experts_run = 0;
  double single_row_experts = 0;
  // A whole step ("step" row) as the runner ran it (ModelRunner::LastDecodeGraph): a
  // decode step replayed as a CUDA graph, the graph's rows (the step's sequences and the
  // padding after them) and the context bucket it was launched for; 0 and 0: run op by op
  // (every op row, every step of a runner without graphs). kNotRecorded (an empty or
  // absent cell): the file does not say (a Vidur file, a profile written before these
  // columns); a fit then takes such a decode step of servelab's CUDA kernels to have run
  // as the uncapped graph kernels/decode_graph_shape.h gives (StepGraphOf). A recorded
  // graph is at most that one: the runner's limits only lower it.
  static constexpr int64_t kNotRecorded = -1;
  int64_t graph_rows = kNotRecorded;
  int64_t graph_context = kNotRecorded;
  bool GraphRecorded() const { return graph_rows != kNotRecorded; }
  // A kStepAfterPrefill row: the decode step's place after the chunk (1 = the first
  // decode after it, at most kMaxAfterPrefill) and the chunk's tokens (from position 0);
  // 0 and 0 on every other row.
  int32_t after_prefill = 0;
  int32_t prefill_before = 0;
  int64_t line = 0;  // in its file, for messages
};

// The op of a whole decode step timed right after a prefill chunk (ProfileRow's
// after_prefill, prefill_before): how a device's first decodes after a compute-bound step
// run slower than a streak's settled ones (`servelab profile`; sim/after_prefill.h fits it).
inline constexpr char kStepAfterPrefill[] = "step_after_prefill";
inline constexpr int32_t kMaxAfterPrefill = 1000;

struct ProfileTable {
  std::string path;
  std::string layout;  // "servelab", "vidur-mlp", "vidur-attention"
  std::vector<ProfileRow> rows;
  // Rows that repeated an earlier row's device, shape, op and sizes (and routing, KV
  // capacity, backend), folded into it so that each configuration weighs once in a fit
  // and its error: the means of their medians, p10s and p90s, the repeats summed, the
  // first one's line. Vidur's A100 Llama-2-7B MLP profile measures 8 of its 1,036
  // configurations twice (2,048 and 4,096 tokens at each TP), 0.0-3.5% apart; its A100
  // Llama-2-70B attention profile 290 of its configurations two or three times (a median
  // 0.6% apart, at most 10.3%).
  int64_t merged_rows = 0;
};

// How far a profile's whole steps moved within their rows: per "step" row of `rows` with
// a median above 0 and at least kMinSpreadRepeats repeats (fewer: its p10 and p90 are
// its extremes' interpolations), (p90 - p10) / median in percent; their median and p90
// over the rows. `servelab profile` prints it, and it and `calibrate` note a profile
// whose median is above kNoisyProfileSpreadPct.
// On this project's 2-core VM (2026-12-03, 15 repeats in passes) three shapes profiled
// together on a quiet host gave 5.0-6.0% (10.4-12.7% over all rows, ops included: short
// ops move more); a profile taken in a noisy quarter of an hour gave 42% over all rows (its
// step rows were not kept), and its fit 9.8% per layer in sample against 1.7-2.2% for
// quiet ones.
struct ProfileSpread {
  int64_t rows = 0;  // step rows counted; 0: none (the figures are then 0)
  double median_pct = 0, p90_pct = 0;
};
inline constexpr int32_t kMinSpreadRepeats = 5;
// A median spread above this, 2.5 times the quiet host's: the host moved during the
// profile.
inline constexpr double kNoisyProfileSpreadPct = 15;
ProfileSpread SpreadOf(std::span<const ProfileRow> rows);
// `device`: the GPU of a Vidur file ("" = from its name). Errors name file, line, column.
StatusOr<ProfileTable> ReadProfile(const std::string& path, const std::string& device = "");

// The servelab layout.
std::string ProfileCsvHeader();  // with its newline
void WriteProfileRow(std::ostream& out, const ProfileRow& row);

}  // namespace servelab
