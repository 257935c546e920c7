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
//   split_kv  decode attention as FlashAttention-2's split-KV kernel runs it
//             (split_kv_grid.h):
//             fixed + bytes / (bandwidth x memory_efficiency)
//                   + ramp x s_per_pair_ramp_byte + (pair_bytes - ramp) x s_per_pair_byte
//                   + single_bytes x s_per_cta_byte
//                   + waves x s_per_wave + combine x combine_s
//                   + combine_splits x combine_s_per_split + rows x s_per_row
// `fixed` is what a kernel costs whatever its size (launch, synchronisation, the tail of
// a wave): the term a datasheet roofline lacks, which dominates small ops and high TP.
// Only prefill attention has causal FLOPs (the new tokens attending to each other, which
// a tiled kernel computes with masked, part-empty tiles, at its own rate); only attention
// has a per-row cost (per query row, a prefill token or a decoding sequence: its softmax
// state, its output write).
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
//   moe_mlp  a mixture of experts' MLP (MoeMlpWork): the router's, the shared expert's and
//       the routed experts' GEMMs and SiLU x mul (expected over uniform routing), and
//       `experts` the experts run, each charged s_per_expert beside the other terms (the
//       CPU runner calls one GEMM an expert; a fused kernel fits it near 0), and the
//       bytes of the experts given one row at a rate of their own (the CPU runner's GEMV
//       path streams them 3-4x faster than its blocked GEMM packs a few rows' weights)
//   attention_decode  one new token over `context` cached ones, per sequence:
//       flops 4 q (context + 1), bytes (context + 1) 2 kv c + 2 q a; a batch sums them
//   attention_prefill  a chunk of n new tokens after `context` cached ones: flops
//       4 q n context (to the cached tokens), causal_flops 4 q n (n + 1) / 2, rows n,
//       bytes (context + n) 2 kv c + 2 n q a
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/op.h"
#include "driver/gpu_spec.h"
#include "sim/expert_routing.h"
#include "sim/memory.h"

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
  double rows = 0;          // attention only: query rows (prefill tokens, decode sequences)
  // A GEMM of one row (one token; for lm_head, one emitting row): BLAS libraries run it
  // as a matrix-vector product, a kernel of its own (cuBLAS's gemv, Eigen's GEMV path).
  bool single_row = false;
  double gemm_rows = 0;  // a GEMM's M (its rows), for tile quantization; 0 otherwise
  double gemm_k = 0, gemm_n = 0;  // a GEMM's weight matrix, [K, N] per GPU; 0 otherwise
  // Split-KV decode attention (AddSplitKvWork, split_kv_grid.h): the CTA bytes of its paired first wave
  // and of its single ones, its waves, 1 when the splits need the combine kernel, and the
  // splits it combines. 0 for every other op.
  double pair_bytes = 0;
  double single_bytes = 0;
  double cta_bytes_per_token = 0;  // the K and V bytes a CTA streams a token
  double waves = 0;
  double combine = 0;
  double combine_splits = 0;
  // Attention as servelab's CUDA kernels run it, one thread block walking its tokens one
  // chunk after another (latency-bound, not bandwidth-bound, until the device is full):
  // cta_tokens, the tokens walked in turn on the busiest SM (decode: its waves x the
  // longest partition, sim/paged_decode_grid.h; prefill: the blocks' walks as the SMs
  // take them, sim/paged_prefill_grid.h); reduce, 1 when a decode launch is split into
  // partitions (the kernel that merges them runs), and partitions, the partitions each
  // sequence is split into then. 0 for every other kernel.
  double cta_tokens = 0;
  double reduce = 0;
  double partitions = 0;
  // moe_mlp: the experts it runs (touched, on the busiest GPU), each a kernel or a GEMM
  // call of its own where the engine runs them one by one. 0 for every other op.
  double experts = 0;
  // moe_mlp: the weight and activation bytes of the experts given one row each, which an
  // engine running experts one by one reads as matrix-vector products (not in `bytes`).
  double single_row_expert_bytes = 0;
  OpWork& operator+=(const OpWork& o) {
    bytes += o.bytes;
    flops += o.flops;
    causal_flops += o.causal_flops;
    rows += o.rows;
    return *this;
  }
  OpWork operator*(double k) const {
    OpWork w;
    w.bytes = bytes * k;
    w.flops = flops * k;
    w.causal_flops = causal_flops * k;
    w.rows = rows * k;
    return w;
  }
};

// An op that scales with the step's tokens or emitting rows (everything but attention):
// `rows` is T, or E for lm_head and sampling.
OpWork RowsWork(Op op, const OpShape& shape, double rows);
// A [rows, k] x [k, n] GEMM at `shape`'s dtypes (RowsWork's GEMMs are such).
OpWork GemmWork(const OpShape& shape, double rows, double k, double n);
// Multi-head latent attention's GEMMs, (k, n) per GPU of a TP group of `tp`, in step order:
// the query's down- and up-projections (or its direct one), the latent's down-projection
// (replicated over TP, as vLLM's ReplicatedLinear), the latent's up-projections to each
// head's key and value absorbed into one GEMM, and the output projection, last.
std::vector<std::pair<double, double>> MlaAttentionGemms(const ModelSpec& m, double tp);
// A mixture-of-experts layer's SwiGLUs as `shape`'s dense MLP ops (RowsWork) see them:
// a routed expert's (intermediate_size its width, split over the TP group, or whole under
// expert parallelism, ep > 1) and the shared expert's (its width, split over TP).
OpShape RoutedExpertShape(const OpShape& shape, int32_t ep);
OpShape SharedExpertShape(const OpShape& shape);
// A mixture-of-experts layer's GEMMs, per GPU. The router, [T, h] x [h, E], is replicated
// over the TP group. The routed experts run as one grouped GEMM for gate|up and one for
// down (`op`: kGateUpProj or kDownProj; vLLM's fused MoE kernels), over `rows` token x
// expert rows of `touched` experts, computing `padded_rows` (each expert's rows rounded up
// to whole blocks, ExpertRouting::BusiestGpuPaddedRows): bytes touched K N w +
// rows (K + N) a, FLOPs 2 padded_rows K N, with K, N the expert's (`expert_shape`,
// RoutedExpertShape). The rows are already in blocks: no row tile applies again.
OpWork RouterWork(const OpShape& shape, double tokens);
OpWork GroupedExpertWork(Op op, const OpShape& expert_shape, double rows, double touched,
                         double padded_rows);
// moe_mlp, a MoE layer's whole MLP as one op over a step's tokens, per GPU: the router,
// a shared expert (a dense SwiGLU at its width, split over TP) and the routed experts
// (gate|up, SiLU x mul, down over the busiest GPU's token x expert rows, the weights of
// its experts touched; widths split over TP, or whole experts under expert parallelism),
// the GEMMs' FLOPs over their rows (no tiles), and `experts` the experts it runs; the
// experts given one row apart, in single_row_expert_bytes (ExpertRouting's expectation).
OpWork MoeMlpWork(const OpShape& shape, const RoutedTokens& step, const ExpertRouting& routing);
// The same over routing as it happened (a profile that counted it): `rows` token x expert
// rows over `touched` experts, `single` of them given one row, on one GPU of EP degree `ep`.
OpWork MoeMlpWork(const OpShape& shape, double tokens, int32_t ep, double rows, double touched,
                  double single);
// Attention, one sequence.
OpWork DecodeWork(const OpShape& shape, double context);
OpWork PrefillWork(const OpShape& shape, double chunk, double context);
// One profile row's work: `tokens` rows, or `batch` emitting rows for final_norm, lm_head
// and sampling (a prefill chunk emits one row, a decode batch one per sequence); for
// attention_decode, `batch` sequences at `context`; attention_prefill: one chunk of
// `tokens` after `context`; moe_mlp: `tokens` tokens routed uniformly (the engine's
// profile runs one GPU: no expert parallelism).
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
  // Split-KV decode attention (the split_kv form): per CTA byte in a wave of two CTAs a
  // SM and in a wave of one, per wave, the combine kernel and its cost per split.
  double s_per_pair_byte = 0;
  double s_per_cta_byte = 0;
  // The paired wave's first pair_ramp_tokens a CTA, at s_per_pair_ramp_byte (0: none).
  double pair_ramp_tokens = 0;
  double s_per_pair_ramp_byte = 0;
  double s_per_wave = 0;
  double combine_s = 0;
  double combine_s_per_split = 0;
  // servelab's attention kernels: per token walked on the busiest SM (OpWork::cta_tokens),
  // the partitions' reduce kernel, and per partition it merges.
  double s_per_cta_token = 0;
  double reduce_s = 0;
  double s_per_partition = 0;
  // moe_mlp: per expert run (OpWork::experts) and per byte of its one-row experts
  // (OpWork::single_row_expert_bytes), beside the terms above.
  double s_per_expert = 0;
  double s_per_single_row_expert_byte = 0;
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
// A dense MLP's ops in step order, which a mixture of experts' layers replace with
// moe_mlp; whether `op` is one of them.
inline constexpr std::array<Op, 3> kDenseMlpOps = {Op::kGateUpProj, Op::kSiluAndMul,
                                                   Op::kDownProj};
bool IsDenseMlp(Op op);
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
