#pragma once
// Fitting per-op time models (sim/op_model.h) to measured profiles (how well a fit
// predicts a profile: sim/fit_evaluation.h).
//
// Each op is fitted on its own, in its physical form (a fixed per-kernel cost plus
// memory and compute terms, or memory alone for stream ops), minimising the squared
// RELATIVE error (rows weighted by 1 / measured time). The max() of the roofline form
// splits the rows into memory- and compute-bound ones; the fit alternates between
// assigning each row to the term that dominates it and solving the weighted linear least
// squares problem that assignment gives (Eigen), until the assignment holds. The
// alternation finds a local optimum, so it starts from the datasheet roofline's
// assignment and from up to 64 splits of the rows by arithmetic intensity, and keeps the
// best. Coefficients stay >= 0: each least squares is solved with the bound
// (sim/nonnegative_least_squares.h, Lawson and Hanson's active set), not by dropping the
// most negative term until none is left, which on 2026-12-03 fitted a CPU mixture of
// experts' moe_mlp at 6.67% in sample where the bounded optimum is 1.19% (the Vidur fits
// were at the optimum either way). A term no row is bound by cannot be identified: it keeps
// the roofline's default efficiency, and the model says so.
//
// Refinements of the form, each kept only where the measurements ask for it:
//   additive    the roofline form's terms summed instead of max()ed (a kernel that does
//               not overlap memory traffic with compute: the CPU's blocked GEMM packs,
//               then multiplies), chosen per op when it fits better;
//   row tile    a GEMM computes its rows in tiles (cuBLAS's 64 or 128 rows, Eigen's
//               register blocks): M rows cost ceil(M / tile) tiles' FLOPs. The tile, a
//               power of two up to 128, is chosen per GEMM when one explains better;
//   cached      a stream op's bytes in two tiers, a knee at cache_bytes (the L2: small
//               activations stay in it between kernels), chosen when one explains
//               better; the knee is searched over the measured sizes;
//   split_kv    decode attention as FlashAttention's split-KV kernel grids it
//               (op_model.h), for rows FlashAttention ran (Vidur's attention_backend) on
//               a GPU whose SMs the catalog knows: fixed, bytes, the grid's first wave
//               (paired or not) and later ones, per wave, the combine kernel and per
//               sequence, one least squares;
//   single row  a GEMM of one row is a matrix-vector product, another kernel (cuBLAS's
//               gemv, Eigen's GEMV path): its rows get a stream fit of their own;
//   per expert  moe_mlp, a mixture of experts' MLP, has two more columns beside fixed,
//               bytes and FLOPs: the experts it runs (op_model.h), at per_expert_us each,
//               and the bytes of those given one row, at their own memory efficiency.
// To tell a GEMM's fixed cost from its weight reads the profiles need two or more weight
// sizes (model shapes, or TP degrees): with one, the two are collinear, and a fit that
// folds weight reads into `fixed` does not transfer to another shape.
//
// Coefficients are kept as the fixed cost and efficiencies against the device's peaks,
// so a fit carries to another GPU (its peaks) and to other shapes and TP degrees (the
// work formulas): what transfers is exactly what the form assumes.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "driver/gpu_spec.h"
#include "driver/profile_table.h"
#include "sim/after_prefill.h"
#include "sim/counted_routing.h"
#include "sim/gemm_corrections.h"
#include "sim/op_model.h"
#include "sim/roofline_cost_model.h"

namespace servelab {

struct OpFit {
  Op op = Op::kQkvProj;
  double fixed_us = 0;
  double memory_efficiency = 0;   // of the peak bandwidth (the link's, for allreduce)
  double compute_efficiency = 0;  // of the tensor peak; roofline-form ops only
  double causal_efficiency = 0;   // prefill attention: its causal FLOPs' rate
  double per_row_us = 0;          // attention: per query row (a prefill token, a decode sequence)
  bool memory_fitted = false;     // false: no row was memory-bound, the default was kept
  bool compute_fitted = false;
  bool additive = false;          // roofline ops: terms summed, not max()ed (op_model.h)
  int32_t row_tile = 1;           // GEMMs: rows computed in tiles of this many (op_model.h)
  // attention_decode in the split_kv form (op_model.h): fixed + bytes at memory_efficiency
  // + the kernel's grid terms on its busiest SM: in the first wave its two CTAs stream the
  // shorter's K and V at pair_memory_efficiency of one SM's share of the bandwidth
  // (bandwidth / SMs; the two together), the rest of the longer's (or a lone CTA's) at
  // cta_memory_efficiency, and each later wave its longest CTA's at cta_memory_efficiency;
  // each wave costs wave_us, the combine kernel combine_us + combine_per_split_us a split,
  // each sequence per_row_us. The paired bytes' first pair_ramp_tokens a CTA stream at
  // pair_ramp_memory_efficiency instead (0 tokens: no ramp).
  bool split_kv = false;
  double cta_memory_efficiency = 0;
  double pair_memory_efficiency = 0;
  int64_t pair_ramp_tokens = 0;
  double pair_ramp_memory_efficiency = 0;
  double wave_us = 0;
  double combine_us = 0;
  double combine_per_split_us = 0;
  // moe_mlp: each expert it runs costs this beside its other terms (OpWork::experts), and
  // the bytes of its experts given one row stream at this efficiency (0: none fitted).
  double per_expert_us = 0;
  double single_row_expert_memory_efficiency = 0;
  // Stream ops: bytes past cache_bytes run at beyond_cache_memory_efficiency (0: one tier).
  double cache_bytes = 0;
  double beyond_cache_memory_efficiency = 0;
  int64_t points = 0;
  // GEMMs: the distinct weight matrices (K x N) the fit saw. Fixed cost and weight reads
  // are collinear with one and told apart by two points with two: a fit on fewer than three
  // may fold weight reads into its fixed cost, which does not carry to another shape.
  int64_t weight_sizes = 0;
  // Attention on servelab's own CUDA kernels (a GPU profile whose rows name no attention
  // backend, op_model.h's OpWork::cta_tokens): per token the busiest SM's blocks walk in
  // turn, and for decode the partitions' reduce kernel and its cost a partition, with
  // resident_ctas, the blocks an SM runs at once in paged_decode_grid.h's and
  // paged_prefill_grid.h's counts (chosen by the fit). 0: not counted (prefill: its
  // longest walk).
  double per_cta_token_us = 0;
  double reduce_us = 0;
  double per_partition_us = 0;
  int32_t resident_ctas = 0;
  // GEMMs: the matrix-vector kernel of single-row products, when the profile measured
  // enough of them (op_model.h's OpCoefficients::has_single_row).
  bool single_row_fitted = false;
  double single_row_fixed_us = 0;
  double single_row_memory_efficiency = 0;
  int64_t single_row_points = 0;
  // "roofline", "additive", "split_kv" or "stream", as MODEL.yaml and calibration.json
  // name it.
  std::string_view FormName() const;
  // The coefficients on `gpu` for `shape`'s dtypes.
  OpCoefficients On(const GpuSpec& gpu, const OpShape& shape) const;
};

struct CalibratedModel {
  std::string device;  // the GPU the profiles were measured on
  std::vector<std::string> fitted_from;
  std::map<Op, OpFit> ops;
  bool has_step_overhead = false;
  double step_overhead_us = 0;  // a whole step beyond its ops, from "step" rows
  // A decode step (one new token a sequence) beyond its ops, when it differs from the
  // others: servelab's CUDA engine replays its decode steps as CUDA graphs, which launch
  // none of the ops the profile timed one by one, so its decode steps take less than
  // their ops' sum (a negative overhead), its other steps not.
  bool has_decode_step_overhead = false;
  double decode_step_overhead_us = 0;
  // Whether those decode steps ran as the runner's graphs run them
  // (kernels/decode_graph_shape.h: the padded batch's rows, the context bucket's
  // partitions): the fit predicts its decode step rows so, and the cost model its decode
  // steps (CalibratedCostModel's decode_graphs).
  bool decode_graphs = false;
  double StepOverheadUs(bool decode_only) const {
    return decode_only && has_decode_step_overhead ? decode_step_overhead_us : step_overhead_us;
  }
  // The routing MoE profiles counted, one entry per MoE shape (sim/counted_routing.h).
  std::vector<CountedRouting> routing;
  // The first decode steps after a prefill step, slower than settled ones
  // (sim/after_prefill.h): from kStepAfterPrefill rows; none without them.
  std::optional<AfterPrefill> after_prefill;
  // The GEMMs' measured / fitted time at the weight shapes the profiles measured, on
  // `device` only (sim/gemm_corrections.h).
  std::vector<GemmCorrection> gemm_corrections;
  // Whether decode attention is fitted in the split_kv form (op_model.h).
  bool SplitKvDecode() const {
    const auto it = ops.find(Op::kAttentionDecode);
    return it != ops.end() && it->second.split_kv;
  }
};

// The datasheet roofline's form and efficiencies for `op` (`roofline`'s, by default
// RooflineOptions'): what a fit starts from, keeps for a term it cannot identify, and
// what the calibrated cost model takes for an op no profile covers.
OpFit RooflineFit(Op op, const RooflineOptions& roofline = {});

struct FitOptions {
  RooflineOptions defaults;  // its efficiencies and all-reduce latency (RooflineFit)
  int32_t min_points_per_coefficient = 4;
  int32_t min_distinct_sizes = 3;
  // Correct the GEMMs at the weight shapes measured at min_distinct_sizes row counts or
  // more (sim/gemm_corrections.h).
  bool gemm_corrections = true;
  // Given: every MoE shape's routing skew (CountedRoutingOf), in place of the one its
  // profile's decode rows fit.
  std::optional<double> routing_skew;
};

// Fits every op the tables measure. All rows must come from one device (a catalog GPU or
// "cpu"). InvalidArgument naming the op when it has too few rows or too few distinct
// sizes to fit its coefficients, instead of fitting noise. A GEMM's single-row rows get
// their own (matrix-vector) fit when there are min_points_per_coefficient of them and
// enough other rows for the main fit; else they join it.
//
// The step overhead: with "step" rows from a profile that gives `layers`, the median over
// them of the measured step minus the fitted ops' sum (every per-layer op times the
// layers, the per-step ops once), clamped at 0; has_step_overhead says whether it was
// fitted. Decode steps run as CUDA graphs (StepGraphOf: as their rows record it, the
// graph's rows and context bucket; in a profile that does not record it, every decode step
// when every step row is of servelab's own CUDA kernels, ServelabGpuKernels) have a median
// of their own (decode_step_overhead_us, not clamped: replayed as graphs, they can take
// less than their ops timed one by one), the step overhead is the other steps', and the
// model says decode_graphs: each such row's ops predicted as its graph runs them
// (PredictOps). A profile of a runner with `engine.cuda_graphs: false` records its decode
// steps as run op by op, and its model has no decode_graphs.
//
// The routing: what MoE rows counted (CountedRoutingOf), per MoE shape.
//
// The GEMM corrections: each GEMM row's measured time over its fitted form's, by weight
// shape and rows (GemmCorrectionsOf); the step overhead is fitted with them applied.
StatusOr<CalibratedModel> FitProfiles(const std::vector<ProfileTable>& tables,
                                      const FitOptions& options = {});

// A profile row's work as the fit and the evaluation count it: ProfiledWork, and for
// decode attention the split-KV grid on `gpu` (split_kv_grid.h; none when its SMs are unknown).
// On a row of servelab's own CUDA kernels (ServelabGpuKernels), attention's cta_tokens
// too, with `resident_ctas` blocks an SM: for prefill paged_prefill_grid.h's (its context
// and chunk when 0), for decode paged_decode_grid.h's (none when 0).
// A moe_mlp row's routing is what it counted; without counts, `routing`'s entry for its
// MoE shape (the simulator's routing model: a decode row `batch` one-token draws, a chunk
// one sequence's), else uniform routing over independent tokens.
OpWork ProfileRowWork(Op op, const ProfileRow& row, const GpuSpec& gpu,
                      std::span<const CountedRouting> routing = {}, int32_t resident_ctas = 0);
// Whether `row` was measured on servelab's own CUDA kernels: a GPU profile (SMs known)
// whose rows name no attention backend (Vidur's name FlashAttention's).
bool ServelabGpuKernels(const ProfileRow& row, const GpuSpec& gpu);
// A profile row's model shape and TP degree, at OpShape's dtypes (what profiles run).
OpShape ProfileRowShape(const ProfileRow& row);

// The GPU whose peaks the efficiencies of `device` refer to: a catalog GPU, or for "cpu"
// a nominal device of 1 GB/s and 1 GFLOP/s (CPU fits are kept in those units).
StatusOr<GpuSpec> DeviceSpec(const std::string& device);


}  // namespace servelab
