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
//   split_kv  decode attention as FlashAttention-2's split-KV kernel runs it (below):
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
// FlashAttention-2's decode kernel (flash-attn's num_splits_heuristic, which vLLM's and
// Vidur's FlashAttention decode run) launches one CTA per (sequence, KV head, split of
// the KV length into 128-token blocks); a batch too small to fill ~80% of the SMs is split
// along the KV, and a second kernel combines the splits. Its time steps with the grid
// the heuristic picks, not with the bytes: at Llama-2-70B TP 2 on an A100 (4 KV heads a
// GPU), 21 sequences take 60% longer than 22 at short contexts (split, then not), and
// every 216 CTAs (two resident a SM) add a wave. The kernel's work is counted as
//   splits      the heuristic's, for seqs x kv_heads CTAs a split over the KV length (the
//               longest sequence's, vLLM's max_seqlen_k; Vidur's profiler allocated
//               max_model_len, which its rows carry)
//   CTA blocks  the whole 128-token blocks of K and V each CTA streams: its split's share
//               of its sequence's (0 for a split past the sequence's end: it exits at
//               once; such a CTA is idle, the others busy)
//   busiest SM  the one given the most busy CTAs (then the most blocks) by the block
//               scheduler as modelled (BusiestSmCtaBlocks): the CTAs in grid order (split
//               before sequence x KV head), one a SM and then a second (two are resident
//               a SM: their shared memory); an idle CTA's slot takes the next CTA at once,
//               SM by SM; once every slot holds a busy CTA, each of the rest starts on the
//               SM whose slot frees first (the fewest blocks given; in a grid of more than
//               4 CTAs a SM, on the SMs in turn). Which SMs the busy
//               CTAs land on decides the time: 10 sequences split 5 ways (busy CTAs 0, 5,
//               ..., 195 of 200) never share an SM, 16 split 3 ways (0, 3, ..., 189 of
//               192: the second round lands on the first's SMs) do, and take 45-80% longer
//               than 22 unsplit sequences (combine included).
//   waves       ceil(CTAs the busiest SM is given / 2). The first wave's CTAs all start at
//               the launch: when it holds two, the shorter's blocks stream at the paired
//               rate (pair_bytes) and the rest of the longer's at the single CTA's
//               (single_bytes); one alone streams at the single rate. A later wave's CTAs
//               start as slots free, staggered, and add its longest CTA's time at the
//               single rate (single_bytes), their bytes beyond it running at the bandwidth
//               (the bytes term): the A100's decode time steps at 108, 216 and 432 CTAs,
//               not at 324, where the second wave's CTAs start to pair. Counting each CTA's
//               own blocks (not the longest CTA's for all) matters when a context crosses a
//               split's boundary: the new CTAs stream one block, and counted as full ones
//               they over-predicted 19-21 sequences at 1,792-2,048 tokens by 18-30%.
//   ramp        of the paired blocks, those of the first pair_ramp_tokens
//               (min(pair_bytes, pair_ramp_tokens x cta_bytes_per_token)), which stream
//               at a rate of their own: on the A100 the first 768 tokens of a paired CTA
//               take 1.5x as long a byte as the rest, and a paired batch's time grows
//               more slowly with the context past them; without the ramp, a fit on
//               contexts up to 1,024 over-predicts longer ones by 5.5% (with it, 2.3%).
//   rows        the sequences (each one query row: its query, output and block table)
//   combine     1 when split: the kernel that merges the splits' partial outputs, and
//               combine_splits, the splits it merges (each row reads every split's
//               partial output): one sequence split 16 ways takes about 3 us longer to
//               combine than 2 ways
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <tuple>
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
  // Split-KV decode attention (AddSplitKvWork): the CTA bytes of its paired first wave
  // and of its single ones, its waves, 1 when the splits need the combine kernel, and the
  // splits it combines. 0 for every other op.
  double pair_bytes = 0;
  double single_bytes = 0;
  double cta_bytes_per_token = 0;  // the K and V bytes a CTA streams a token
  double waves = 0;
  double combine = 0;
  double combine_splits = 0;
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
// FlashAttention-2's split-KV grid (the note above): the splits its heuristic chooses for
// `ctas` CTAs a split on `sms` SMs over `kv_blocks` 128-token blocks (at most 128).
int64_t FlashDecodeSplits(int64_t ctas, int32_t sms, int64_t kv_blocks);
inline constexpr int64_t kFlashDecodeBlockTokens = 128;
inline constexpr int32_t kFlashDecodeResidentCtas = 2;  // a SM at once (its shared memory)
// Busy CTAs in the order an SM runs them, as runs of CTAs streaming as many blocks:
// memory by runs, not CTAs (a grid of 2^33 CTAs gives its busiest SM ~10^8 of them, in a
// few runs when its sequences are alike).
struct CtaRuns {
  std::vector<std::pair<int64_t, int64_t>> runs;  // (blocks a CTA, CTAs), in order
  // `count` more CTAs of `blocks` each (none when count <= 0), merged with the last run
  // when it has as many blocks.
  void Add(int64_t blocks, int64_t count) {
    if (count <= 0) return;
    if (!runs.empty() && runs.back().first == blocks) {
      runs.back().second += count;
    } else {
      runs.emplace_back(blocks, count);
    }
  }
  size_t size() const {  // CTAs
    int64_t n = 0;
    for (const auto& run : runs) n += run.second;
    return static_cast<size_t>(n);
  }
  // Each CTA's blocks, one entry a CTA (for tests: as large as the CTAs).
  std::vector<int64_t> Expanded() const {
    std::vector<int64_t> out;
    for (const auto& [blocks, count] : runs) out.insert(out.end(), static_cast<size_t>(count), blocks);
    return out;
  }
  bool operator==(const CtaRuns&) const = default;
};
// An SM's CTAs run kFlashDecodeResidentCtas at a time, in waves: its first two together
// (`pair_blocks`: the shorter's blocks; the rest of the longer's alone, in
// `single_blocks`), and each later wave as long as its longest CTA (in `single_blocks`).
struct WaveBlocks {
  int64_t waves = 0, pair_blocks = 0, single_blocks = 0;
  static WaveBlocks Of(const CtaRuns& ctas);  // one pass over the runs
};
// The busiest SM's CTAs when `launched` CTAs, of which CTA `cta` (grid order) streams
// `blocks(cta)` whole blocks of KV (0: it exits at once), are dispatched as the header
// above says: the blocks of each busy CTA it is given, in the order given. The busiest
// gets the most busy CTAs, then the most blocks (then the lowest index). `run_length(cta)`
// says how many CTAs from `cta` on stream as many blocks (at least 1; a sequence's CTAs
// when unsplit): they are placed at once where the grid goes round the SMs in turn.
template <class Blocks, class RunLength>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks, RunLength run_length);
template <class Blocks>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks) {
  return BusiestSmCtaBlocks(sms, launched, blocks, [](int64_t) { return int64_t{1}; });
}
// The split-KV fields of a decode batch on `sms` SMs whose sequences attend `attended(i)`
// tokens (cached + the new one), i < seqs; the split length is `kv_length` tokens, or the
// longest sequence's when 0. One pass over the sequences, then one over the CTAs.
template <class Attended>
void AddSplitKvWork(OpWork& work, const OpShape& shape, int32_t sms, int64_t kv_length,
                    int64_t seqs, Attended attended);
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

template <class Blocks, class RunLength>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks, RunLength run_length) {
  constexpr int32_t kResident = kFlashDecodeResidentCtas;
  if (sms <= 0 || launched <= 0) return {};
  const auto n = static_cast<size_t>(sms);
  std::vector<int64_t> given(n, 0);     // busy CTAs each SM got
  std::vector<int32_t> resident(n, 0);  // of them, in the launch and the refills
  std::vector<int64_t> load(n, 0);      // their blocks
  std::vector<std::pair<int32_t, int64_t>> placed;  // each busy CTA's SM and blocks, in order
  int64_t next = 0;
  auto give = [&](int32_t sm, int64_t b) {
    ++given[static_cast<size_t>(sm)];
    load[static_cast<size_t>(sm)] += b;
    placed.emplace_back(sm, b);
  };
  auto place = [&](int32_t sm) {
    const int64_t b = blocks(next++);
    if (b > 0) {
      give(sm, b);
      ++resident[static_cast<size_t>(sm)];
    }
  };
  // The launch: one CTA a SM in grid order, then a second one a SM.
  for (int32_t round = 0; round < kResident; ++round) {
    for (int32_t sm = 0; sm < sms && next < launched; ++sm) place(sm);
  }
  // The idle CTAs exit at once; the freed slots take the next CTAs, SM by SM, each SM's
  // slots filled before the next's. An SM whose slots all hold busy CTAs takes no more.
  std::vector<int32_t> open;
  for (int32_t sm = 0; sm < sms; ++sm) {
    if (resident[static_cast<size_t>(sm)] < kResident) open.push_back(sm);
  }
  while (next < launched && !open.empty()) {
    size_t still_open = 0;
    for (const int32_t sm : open) {
      for (int32_t slot = resident[static_cast<size_t>(sm)]; slot < kResident && next < launched;
           ++slot) {
        place(sm);
      }
      if (resident[static_cast<size_t>(sm)] < kResident) open[still_open++] = sm;
    }
    open.resize(still_open);
  }
  // Every slot holds a busy CTA: each of the rest starts on the SM whose slot frees first,
  // the one given the fewest blocks (then the fewest CTAs, then the lowest index). Past
  // two full waves (more than 4 CTAs a SM launched) they go round the SMs in turn
  // instead, a step's cost staying linear in its grid: by then the bytes term dominates.
  const int64_t rest_begin = next;
  const bool round_robin = launched > int64_t{2} * kResident * sms;
  if (next < launched && !round_robin) {
    using Slot = std::tuple<int64_t, int64_t, int32_t>;  // blocks, CTAs, SM
    std::priority_queue<Slot, std::vector<Slot>, std::greater<>> first_free;
    for (int32_t sm = 0; sm < sms; ++sm) {
      first_free.emplace(load[static_cast<size_t>(sm)], given[static_cast<size_t>(sm)], sm);
    }
    for (; next < launched; ++next) {
      const int64_t b = blocks(next);
      if (b <= 0) continue;
      const int32_t sm = std::get<2>(first_free.top());
      first_free.pop();
      give(sm, b);
      first_free.emplace(load[static_cast<size_t>(sm)], given[static_cast<size_t>(sm)], sm);
    }
  }
  // The rest's busy CTAs in turn, the i-th on SM i % sms: visit(first SM, CTAs, blocks)
  // for each run of CTAs with the same blocks.
  auto for_each_run_in_turn = [&](auto visit) {
    size_t sm = 0;
    for (int64_t cta = rest_begin; cta < launched;) {
      const int64_t b = blocks(cta);
      const int64_t run = std::clamp<int64_t>(run_length(cta), 1, launched - cta);
      cta += run;
      if (b <= 0) continue;
      visit(sm, run, b);
      sm = (sm + static_cast<size_t>(run % sms)) % n;
    }
  };
  // Whether SM `sm` is among the `count` SMs from `first` on, round the SMs.
  auto in_turn = [&](size_t sm, size_t first, size_t count) {
    return (sm + n - first) % n < count;
  };
  if (round_robin) {
    // Every SM gets run / sms of a run, and the next run % sms SMs one more: a difference
    // array over the SMs, each run costing O(1).
    std::vector<int64_t> more_given(n + 1, 0), more_load(n + 1, 0);
    int64_t all_given = 0, all_load = 0;
    auto add = [&](size_t from, size_t to, int64_t b) {  // SMs [from, to)
      ++more_given[from];
      --more_given[to];
      more_load[from] += b;
      more_load[to] -= b;
    };
    for_each_run_in_turn([&](size_t first, int64_t run, int64_t b) {
      all_given += run / sms;
      all_load += run / sms * b;
      const auto part = static_cast<size_t>(run % sms);
      if (first + part <= n) {
        add(first, first + part, b);
      } else {
        add(first, n, b);
        add(0, first + part - n, b);
      }
    });
    int64_t running_given = 0, running_load = 0;
    for (size_t sm = 0; sm < n; ++sm) {
      running_given += more_given[sm];
      running_load += more_load[sm];
      given[sm] += all_given + running_given;
      load[sm] += all_load + running_load;
    }
  }
  size_t busiest = 0;
  for (size_t sm = 1; sm < n; ++sm) {
    if (given[sm] > given[busiest] || (given[sm] == given[busiest] && load[sm] > load[busiest])) {
      busiest = sm;
    }
  }
  CtaRuns out;
  for (const auto& [sm, b] : placed) {
    if (static_cast<size_t>(sm) == busiest) out.Add(b, 1);
  }
  if (round_robin) {
    for_each_run_in_turn([&](size_t first, int64_t run, int64_t b) {
      const bool one_more = in_turn(busiest, first, static_cast<size_t>(run % sms));
      out.Add(b, run / sms + (one_more ? 1 : 0));
    });
  }
  return out;
}

template <class Attended>
void AddSplitKvWork(OpWork& work, const OpShape& shape, int32_t sms, int64_t kv_length,
                    int64_t seqs, Attended attended) {
  if (seqs <= 0 || sms <= 0) return;
  const int64_t kv_heads = KvHeadsPerGpu(shape.model, shape.tensor_parallel);
  const int64_t q_per_kv = std::max<int64_t>(
      1, shape.model.num_attention_heads / std::max<int64_t>(1, shape.model.num_key_value_heads));
  // Decode with grouped queries runs each KV head's query heads as the rows of one tile
  // of up to 64 (flash-attn's seqlen_q / ngroups swap).
  const int64_t m_blocks = (q_per_kv + 63) / 64;
  auto blocks_of = [](int64_t tokens) {
    return (tokens + kFlashDecodeBlockTokens - 1) / kFlashDecodeBlockTokens;
  };
  std::vector<int64_t> seq_blocks(static_cast<size_t>(seqs));
  int64_t longest = 0;
  for (int64_t i = 0; i < seqs; ++i) {
    const int64_t tokens = attended(i);
    longest = std::max<int64_t>(longest, tokens);
    seq_blocks[static_cast<size_t>(i)] = blocks_of(tokens);
  }
  const int64_t blocks = blocks_of(kv_length > 0 ? kv_length : longest);
  const int64_t splits = FlashDecodeSplits(seqs * kv_heads * m_blocks, sms, blocks);
  const int64_t per_split = (blocks + splits - 1) / splits;  // blocks a split covers
  const int64_t launched = seqs * kv_heads * m_blocks * splits;
  // The whole blocks a CTA streams: its split's share of its sequence's blocks (none for a
  // split past the sequence's end: it exits at once). Grid order: the query-row tile
  // fastest, then the split, then sequence x KV head.
  const int64_t ctas_a_seq = kv_heads * m_blocks * splits;
  auto cta_blocks = [&](int64_t cta) {
    const int64_t seq_blocks_left = seq_blocks[static_cast<size_t>(cta / ctas_a_seq)];
    if (splits == 1) return std::min(seq_blocks_left, per_split);
    const int64_t split = (cta / m_blocks) % splits;
    return std::clamp<int64_t>(seq_blocks_left - split * per_split, 0, per_split);
  };
  // Unsplit, a sequence's CTAs stream as many blocks: one run.
  auto run_length = [&](int64_t cta) {
    return splits == 1 ? ctas_a_seq - cta % ctas_a_seq : m_blocks - cta % m_blocks;
  };
  const CtaRuns busiest = BusiestSmCtaBlocks(sms, launched, cta_blocks, run_length);
  const WaveBlocks w = WaveBlocks::Of(busiest);
  const int64_t waves = w.waves, pair_blocks = w.pair_blocks, single_blocks = w.single_blocks;
  work.cta_bytes_per_token = 2.0 * shape.model.HeadDim() * DTypeBytes(shape.kv_dtype);
  const double block_bytes =
      static_cast<double>(kFlashDecodeBlockTokens) * work.cta_bytes_per_token;
  work.pair_bytes += static_cast<double>(pair_blocks) * block_bytes;
  work.single_bytes += static_cast<double>(single_blocks) * block_bytes;
  work.waves += static_cast<double>(waves);
  work.combine += splits > 1 ? 1.0 : 0.0;
  work.combine_splits += splits > 1 ? static_cast<double>(splits) : 0.0;
}

}  // namespace servelab
