#include "sim/op_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/status.h"
#include "sim/memory.h"
#include "sim/roofline_cost_model.h"
#include "sim/split_kv_grid.h"

namespace servelab {
namespace {

struct Dims {
  double h, q, kv, inter, vocab, qh, kvh, head_dim, w, a, c, tp;
};

Dims DimsOf(const OpShape& s) {
  const ModelSpec& m = s.model;
  const double tp = s.tensor_parallel;
  Dims d{};
  d.h = m.hidden_size;
  d.head_dim = m.HeadDim();
  d.qh = m.num_attention_heads / tp;
  d.kvh = KvHeadsPerGpu(m, s.tensor_parallel);
  d.q = d.qh * d.head_dim;
  // MLA: the cached latent and RoPE key, which every GPU of the TP group holds whole.
  d.kv = m.IsMla() ? static_cast<double>(m.KvLatentDim()) : d.kvh * d.head_dim;
  d.inter = m.intermediate_size / tp;
  d.vocab = m.vocab_size / tp;
  d.w = DTypeBytes(s.weight_dtype);
  d.a = DTypeBytes(s.activation_dtype);
  d.c = DTypeBytes(s.kv_dtype);
  d.tp = tp;
  return d;
}

OpWork Gemm(double rows, double k, double n, double w, double a_in, double a_out) {
  OpWork work;
  work.bytes = k * n * w + rows * (k * a_in + n * a_out);
  work.flops = 2.0 * rows * k * n;
  work.single_row = rows == 1.0;
  work.gemm_rows = rows;
  work.gemm_k = k;
  work.gemm_n = n;
  return work;
}

OpWork Bytes(double bytes) {
  OpWork work;
  work.bytes = bytes;
  return work;
}

}  // namespace

OpWork RowsWork(Op op, const OpShape& shape, double t) {
  const Dims d = DimsOf(shape);
  switch (op) {
    case Op::kQkvProj: return Gemm(t, d.h, d.q + 2 * d.kv, d.w, d.a, d.a);
    case Op::kOProj: return Gemm(t, d.q, d.h, d.w, d.a, d.a);
    case Op::kGateUpProj: return Gemm(t, d.h, 2 * d.inter, d.w, d.a, d.a);
    case Op::kDownProj: return Gemm(t, d.inter, d.h, d.w, d.a, d.a);
    case Op::kLmHead: return Gemm(t, d.h, d.vocab, d.w, d.a, 4.0);  // f32 logits
    case Op::kInputNorm:
    case Op::kPostAttentionNorm: return Bytes(4.0 * t * d.h * d.a);
    case Op::kResidualAdd: return Bytes(3.0 * t * d.h * d.a);
    case Op::kRope: return Bytes(2.0 * t * (d.q + d.kv) * d.a);
    case Op::kKvCacheWrite:  // K and V; MLA: the latent, once
      return Bytes((shape.model.IsMla() ? 1.0 : 2.0) * t * d.kv * (d.a + d.c));
    case Op::kSiluAndMul: return Bytes(3.0 * t * d.inter * d.a);
    case Op::kEmbedding: return Bytes(t * d.h * (d.w + d.a));
    case Op::kFinalNorm: return Bytes(2.0 * t * d.h * d.a);
    case Op::kSampling: return Bytes(4.0 * t * d.vocab);
    case Op::kAllReduce: return Bytes(2.0 * (d.tp - 1) / d.tp * t * d.h * d.a);
    case Op::kAttentionDecode:
    case Op::kAttentionPrefill:
    case Op::kMoeMlp: break;
  }
  SERVELAB_CHECK_MSG(false, "attention work depends on contexts (DecodeWork, PrefillWork), "
                            "moe_mlp's on the routing (MoeMlpWork)");
  return {};
}

OpWork GemmWork(const OpShape& shape, double rows, double k, double n) {
  const Dims d = DimsOf(shape);
  return Gemm(rows, k, n, d.w, d.a, d.a);
}

std::vector<std::pair<double, double>> MlaAttentionGemms(const ModelSpec& m, double tp) {
  const double h = m.hidden_size;
  const double q = static_cast<double>(m.QDim()) / tp;
  const double latent = static_cast<double>(m.KvLatentDim());
  const double heads = m.num_attention_heads / tp;
  const double lora = m.kv_lora_rank, v = m.v_head_dim, nope = m.qk_nope_head_dim;
  std::vector<std::pair<double, double>> gemms;
  if (m.q_lora_rank > 0) {
    gemms.emplace_back(h, m.q_lora_rank);
    gemms.emplace_back(m.q_lora_rank, q);
  } else {
    gemms.emplace_back(h, q);
  }
  gemms.emplace_back(h, latent);
  gemms.emplace_back(lora, heads * (nope + v));
  gemms.emplace_back(heads * v, h);
  return gemms;
}

OpShape RoutedExpertShape(const OpShape& shape, int32_t ep) {
  OpShape expert = shape;
  expert.model.intermediate_size = shape.model.ExpertWidth();
  if (ep > 1) expert.tensor_parallel = 1;
  return expert;
}

OpShape SharedExpertShape(const OpShape& shape) {
  OpShape shared = shape;
  shared.model.intermediate_size = shape.model.shared_expert_intermediate_size;
  return shared;
}

OpWork RouterWork(const OpShape& shape, double tokens) {
  const Dims d = DimsOf(shape);
  return Gemm(tokens, d.h, shape.model.num_experts, d.w, d.a, d.a);
}

OpWork GroupedExpertWork(Op op, const OpShape& expert_shape, double rows, double touched,
                         double padded_rows) {
  SERVELAB_CHECK_MSG(op == Op::kGateUpProj || op == Op::kDownProj,
                     "grouped experts run gate_up_proj and down_proj");
  const Dims d = DimsOf(expert_shape);
  const double k = op == Op::kGateUpProj ? d.h : d.inter;
  const double n = op == Op::kGateUpProj ? 2 * d.inter : d.h;
  OpWork work;
  work.bytes = touched * k * n * d.w + rows * (k + n) * d.a;
  work.flops = 2.0 * padded_rows * k * n;
  return work;
}

OpWork MoeMlpWork(const OpShape& shape, const RoutedTokens& step, const ExpertRouting& routing) {
  const double rows = routing.BusiestGpuRows(step);
  const double touched = routing.Touched(step) / routing.expert_parallel();
  const double single = std::min(routing.BusiestGpuSingleRowExperts(step), touched);
  return MoeMlpWork(shape, step.tokens, routing.expert_parallel(), rows, touched, single);
}

OpWork MoeMlpWork(const OpShape& shape, double tokens, int32_t ep, double rows, double touched,
                  double single) {
  OpWork work = RouterWork(shape, tokens);
  if (shape.model.shared_expert_intermediate_size > 0) {
    const OpShape shared = SharedExpertShape(shape);
    for (const Op op : kDenseMlpOps) work += RowsWork(op, shared, tokens);
  }
  // The routed experts' SwiGLUs (gate|up, SiLU x mul, down) over `rows` rows of `experts`.
  const OpShape expert = RoutedExpertShape(shape, ep);
  auto experts_work = [&](double rows, double experts) {
    OpWork w = GroupedExpertWork(Op::kGateUpProj, expert, rows, experts, rows);
    w += RowsWork(Op::kSiluAndMul, expert, rows);
    w += GroupedExpertWork(Op::kDownProj, expert, rows, experts, rows);
    return w;
  };
  work += experts_work(std::max(0.0, rows - single), touched - single);
  work.single_row = false;
  work.gemm_rows = 0;
  work.gemm_k = work.gemm_n = 0;
  work.experts = touched;
  work.single_row_expert_bytes = experts_work(single, single).bytes;
  return work;
}

WaveBlocks WaveBlocks::Of(const CtaRuns& ctas) {
  constexpr int64_t kWave = kFlashDecodeResidentCtas;
  static_assert(kWave == 2, "the first wave is its two CTAs");
  const auto given = static_cast<int64_t>(ctas.size());
  WaveBlocks w;
  w.waves = (given + kWave - 1) / kWave;
  int64_t first_two[2] = {0, 0};
  int64_t pos = 0, wave_max = 0;
  for (auto [b, count] : ctas.runs) {
    while (count > 0) {
      if (pos < 2) first_two[pos] = b;
      const int64_t offset = pos % kWave;
      if (offset == 0 && pos >= kWave && count >= kWave) {  // whole later waves of this run
        const int64_t whole = count / kWave;
        w.single_blocks += whole * b;
        pos += whole * kWave;
        count -= whole * kWave;
        continue;
      }
      if (offset == 0) wave_max = 0;
      wave_max = std::max(wave_max, b);
      const int64_t take = std::min(count, kWave - offset);
      if (pos == 0 && take == 2) first_two[1] = b;
      pos += take;
      count -= take;
      // A later wave (not the first) closes: its longest CTA.
      if ((pos % kWave == 0 || pos == given) && (pos - 1) / kWave >= 1) w.single_blocks += wave_max;
    }
  }
  if (given >= 2) {
    w.pair_blocks = std::min(first_two[0], first_two[1]);
    w.single_blocks += std::max(first_two[0], first_two[1]) - w.pair_blocks;
  } else if (given == 1) {
    w.single_blocks += first_two[0];
  }
  return w;
}

OpWork DecodeWork(const OpShape& shape, double context) {
  const Dims d = DimsOf(shape);
  const double attended = context + 1.0;
  OpWork work;
  work.bytes = attended * 2.0 * d.kv * d.c + 2.0 * d.q * d.a;
  work.flops = 4.0 * d.q * attended;
  work.rows = 1.0;
  return work;
}

OpWork PrefillWork(const OpShape& shape, double chunk, double context) {
  const Dims d = DimsOf(shape);
  OpWork work;
  work.bytes = (context + chunk) * 2.0 * d.kv * d.c + 2.0 * chunk * d.q * d.a;
  work.flops = 4.0 * d.q * chunk * context;
  work.causal_flops = 4.0 * d.q * chunk * (chunk + 1.0) / 2.0;
  work.rows = chunk;
  return work;
}

int64_t FlashDecodeSplits(int64_t ctas, int32_t sms, int64_t kv_blocks) {
  // Enough CTAs to fill 80% of the SMs: no split.
  if (ctas >= 0.8 * sms) return 1;
  const int64_t most = std::min<int64_t>({128, sms, kv_blocks});
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  // A split count that leaves the blocks per split as the one below it is not a choice
  // (64 blocks in 11 or in 12 splits are both 6 a split).
  auto eligible = [&](int64_t s) {
    return s == 1 || ceil_div(kv_blocks, s) != ceil_div(kv_blocks, s - 1);
  };
  // Each eligible choice's wave efficiency, the fraction of its last wave that is full
  // (0: not a choice); the fewest splits within 85% of the best.
  std::array<double, 129> efficiency{};
  double best = 0;
  for (int64_t s = 1; s <= most; ++s) {
    if (!eligible(s)) continue;
    const double waves = static_cast<double>(ctas * s) / sms;
    efficiency[static_cast<size_t>(s)] = waves / std::ceil(waves);
    best = std::max(best, efficiency[static_cast<size_t>(s)]);
  }
  for (int64_t s = 1; s <= most; ++s) {
    const double e = efficiency[static_cast<size_t>(s)];
    if (e > 0 && e >= 0.85 * best) return s;
  }
  return 1;
}

OpWork ProfiledWork(Op op, const OpShape& shape, double tokens, double batch, double context) {
  if (op == Op::kAttentionDecode) return DecodeWork(shape, context) * batch;
  if (op == Op::kAttentionPrefill) return PrefillWork(shape, tokens, context);
  if (op == Op::kMoeMlp) {
    const ExpertRouting uniform(shape.model.num_experts, shape.model.num_experts_per_tok, 1, {});
    return MoeMlpWork(shape, RoutedTokens::Independent(tokens), uniform);
  }
  return RowsWork(op, shape, ScalesWithEmittingRows(op) ? batch : tokens);
}

bool IsGemm(Op op) {
  return op == Op::kQkvProj || op == Op::kOProj || op == Op::kGateUpProj ||
         op == Op::kDownProj || op == Op::kLmHead;
}

bool IsDenseMlp(Op op) {
  return std::find(kDenseMlpOps.begin(), kDenseMlpOps.end(), op) != kDenseMlpOps.end();
}

bool ScalesWithEmittingRows(Op op) {
  return op == Op::kFinalNorm || op == Op::kLmHead || op == Op::kSampling;
}

OpWork TileQuantized(const OpWork& work, int32_t row_tile) {
  if (row_tile <= 1 || work.gemm_rows <= 0) return work;
  OpWork w = work;
  const double tiles = std::ceil(work.gemm_rows / row_tile);
  w.flops = work.flops * tiles * row_tile / work.gemm_rows;
  return w;
}

double OpSeconds(const OpCoefficients& c, const OpWork& raw) {
  const OpWork work = TileQuantized(raw, c.row_tile);
  if (work.single_row && c.has_single_row) {
    return c.single_row_fixed_s + work.bytes * c.single_row_s_per_byte;
  }
  const double ramp = std::min(work.pair_bytes, c.pair_ramp_tokens * work.cta_bytes_per_token);
  const double kernel = ramp * c.s_per_pair_ramp_byte +
                        (work.pair_bytes - ramp) * c.s_per_pair_byte +
                        work.single_bytes * c.s_per_cta_byte + work.waves * c.s_per_wave +
                        work.combine * c.combine_s +
                        work.combine_splits * c.combine_s_per_split +
                        work.cta_tokens * c.s_per_cta_token + work.reduce * c.reduce_s +
                        work.partitions * c.s_per_partition + work.experts * c.s_per_expert +
                        work.single_row_expert_bytes * c.s_per_single_row_expert_byte;
  if (c.additive) {
    return c.fixed_s + c.MemorySeconds(work.bytes) + work.flops * c.s_per_flop +
           work.causal_flops * c.s_per_causal_flop + work.rows * c.s_per_row + kernel;
  }
  return c.fixed_s +
         std::max(c.MemorySeconds(work.bytes),
                  work.flops * c.s_per_flop + work.causal_flops * c.s_per_causal_flop) +
         work.rows * c.s_per_row + kernel;
}

OpPeaks PeaksOf(Op op, const GpuSpec& gpu, const OpShape& shape) {
  OpPeaks p;
  p.bytes_per_s = (op == Op::kAllReduce ? gpu.interconnect_gbps : gpu.mem_bandwidth_gbps) * 1e9;
  const bool attention = op == Op::kAttentionDecode || op == Op::kAttentionPrefill;
  p.flops_per_s =
      TensorPeakTflops(gpu, attention ? shape.activation_dtype : shape.weight_dtype) * 1e12;
  return p;
}

}  // namespace servelab
