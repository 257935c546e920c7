#pragma once
// The ops of one decoder step as servelab times and predicts them, per GPU of a tensor-
// parallel group, and the work (bytes moved, FLOPs) each does. The calibration fit
// (sim/calibration.h) and the calibrated cost model share these definitions, so a
// coefficient fitted on one model shape, token count or TP degree means the same on
// another.
//
// Every op's time has one of two forms, with per-op coefficients:
//   roofline  fixed + max(bytes / (bandwidth x memory_efficiency),
//                         flops / (peak x compute_efficiency)
//                         + causal_flops / (peak x causal_efficiency))
//             + rows x per_row
//   stream    fixed + bytes / (bandwidth x memory_efficiency)
//   cached    a stream op in two tiers: its first cache_bytes at one rate (from L2),
//             the rest at another (from HBM), when a fit finds such a knee
//   additive  the roofline form's terms summed instead of max()ed, for a kernel that
//             does not overlap memory traffic with compute (a fit chooses it per op
//             when it explains the measurements better: the CPU's GEMMs)
// `fixed` is what a kernel costs whatever its size (launch, synchronisation, the tail of
// a wave): the term a datasheet roofline lacks, which dominates small ops and high TP.
// Only prefill attention has causal FLOPs (the new tokens attending to each other, which
// a tiled kernel computes with masked, part-empty tiles, at its own rate) and a per-row
// cost (per query token: its softmax state, its output write).
//
// Work, with h = hidden, q = heads x head_dim / tp (per GPU), kv = kv heads per GPU x
// head_dim, I = intermediate / tp, V = vocab / tp, a = activation bytes, w = weight
// bytes, c = KV-cache bytes, T = tokens in the step, E = rows that emit a token:
//   qkv_proj, o_proj, gate_up_proj, down_proj  [T, K] x [K, N]: flops 2TKN,
//       bytes KN w + T (K + N) a   (K, N: h x (q + 2 kv), q x h, h x 2I, I x h)
//   lm_head  [E, h] x [h, V], f32 logits: flops 2EhV, bytes hV w + E (h a + 4V)
//   input_norm, post_attention_norm (residual add fused, as servelab's runners do it):
//       bytes 4Th a; residual_add (a separate add, as Vidur profiles vLLM): 3Th a;
//       rope: 2T(q + kv) a; kv_cache_write: 2T kv (a + c); silu_and_mul: 3TI a;
//       embedding: Th (w + a); final_norm: 2Th a; sampling: 4EV; allreduce (ring, once
//       per call, two per layer): 2 (tp - 1) / tp x Th a over the link bandwidth
//   attention_decode  one new token over `context` cached ones, per sequence:
//       flops 4 q (context + 1), bytes (context + 1) 2 kv c + 2 q a; a batch sums them
//   attention_prefill  a chunk of n new tokens after `context` cached ones: flops
//       4 q n context (to the cached tokens), causal_flops 4 q n (n + 1) / 2, rows n,
//       bytes (context + n) 2 kv c + 2 n q a
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/op.h"
#include "driver/gpu_spec.h"

namespace servelab {

// What an op's work depends on besides token counts: the model, the TP degree, dtypes.
struct OpShape {
  ModelSpec model;
  int32_t tensor_parallel = 1;
  DType weight_dtype = DType::kBf16;
  DType activation_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
};

struct OpWork {
  double bytes = 0;
  double flops = 0;
  double causal_flops = 0;  // prefill attention only
  double rows = 0;          // prefill attention only: query tokens
  // A GEMM of one row (one token; for lm_head, one emitting row): BLAS libraries run it
  // as a matrix-vector product, a kernel of its own (cuBLAS's gemv, Eigen's GEMV path).
  bool single_row = false;
  double gemm_rows = 0;  // a GEMM's M (its rows), for tile quantization; 0 otherwise
  OpWork& operator+=(const OpWork& o) {
    bytes += o.bytes;
    flops += o.flops;
    causal_flops += o.causal_flops;
    rows += o.rows;
    return *this;
  }
  OpWork operator*(double k) const {
    return OpWork{bytes * k, flops * k, causal_flops * k, rows * k, false, 0};
  }
};

// An op that scales with the step's tokens or emitting rows (everything but attention):
// `rows` is T, or E for lm_head and sampling.
OpWork RowsWork(Op op, const OpShape& shape, double rows);
// Attention, one sequence.
OpWork DecodeWork(const OpShape& shape, double context);
OpWork PrefillWork(const OpShape& shape, double chunk, double context);
// One profile row's work: `tokens` rows, or `batch` emitting rows for final_norm, lm_head
// and sampling (a prefill chunk emits one row, a decode batch one per sequence); for
// attention_decode, `batch` sequences at `context`; attention_prefill: one chunk of
// `tokens` after `context`.
OpWork ProfiledWork(Op op, const OpShape& shape, double tokens, double batch, double context);

// An op's coefficients in seconds: per kernel, per byte, per FLOP, per causal FLOP, per
// row (the last three 0 for stream ops). A GEMM's single-row work, when its matrix-
// vector kernel was fitted (has_single_row), takes single_row_fixed_s +
// bytes x single_row_s_per_byte instead: memory-bound, at that kernel's own rate.
struct OpCoefficients {
  double fixed_s = 0;
  double s_per_byte = 0;
  double s_per_flop = 0;
  double s_per_causal_flop = 0;
  double s_per_row = 0;
  bool has_single_row = false;
  double single_row_fixed_s = 0;
  double single_row_s_per_byte = 0;
  // A kernel that does not overlap its memory traffic with its compute (the CPU's
  // blocked GEMM packs its operands, then multiplies): the terms add instead of max().
  bool additive = false;
  // A GEMM computes its rows in tiles of row_tile (1: no quantization): M rows cost
  // the FLOPs of ceil(M / row_tile) x row_tile.
  int32_t row_tile = 1;
  // A stream op whose data fits in the GPU's L2 runs from it: with cache_bytes > 0 the
  // first cache_bytes cost s_per_byte each and the rest s_per_byte_beyond_cache.
  double cache_bytes = 0;
  double s_per_byte_beyond_cache = 0;
  // The memory term of `bytes`.
  double MemorySeconds(double bytes) const {
    if (cache_bytes <= 0 || bytes <= cache_bytes) return bytes * s_per_byte;
    return cache_bytes * s_per_byte + (bytes - cache_bytes) * s_per_byte_beyond_cache;
  }
};
// `work` with its GEMM rows rounded up to whole tiles of `row_tile`.
OpWork TileQuantized(const OpWork& work, int32_t row_tile);
// Whether `op` is a GEMM (its single-row work can have a kernel of its own).
bool IsGemm(Op op);
// Whether a profile row's rows are emitting rows (`batch`), not tokens.
bool ScalesWithEmittingRows(Op op);
double OpSeconds(const OpCoefficients& c, const OpWork& work);

// The peaks an op's efficiencies refer to: memory bandwidth (the link's for allreduce),
// and the tensor peak of the weight dtype (attention: of the activation dtype).
struct OpPeaks {
  double bytes_per_s = 0;
  double flops_per_s = 0;
};
OpPeaks PeaksOf(Op op, const GpuSpec& gpu, const OpShape& shape);

}  // namespace servelab
