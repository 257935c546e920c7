#include "engine/cpu_model_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "core/host_memory.h"
#include "engine/rope_tables.h"
#include "kernels/embedding_gather.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/silu_and_mul.h"
#include "kernels/write_kv_cache.h"

namespace servelab {
namespace {

namespace kcpu = kernels::cpu;

// out [T, W.rows()] = x [T, W.cols()] * W^T (+ bias), f32.
void Linear(const float* x, int32_t num_tokens, const RowMatrix& w, const Eigen::RowVectorXf& bias,
            std::vector<float>& out) {
  out.resize(static_cast<size_t>(num_tokens) * static_cast<size_t>(w.rows()));
  Eigen::Map<const RowMatrix> in(x, num_tokens, w.cols());
  Eigen::Map<RowMatrix> y(out.data(), num_tokens, w.rows());
  y.noalias() = in * w.transpose();
  if (bias.size() > 0) y.rowwise() += bias;
}

kernels::KvCacheShape CacheShape(const ModelSpec& spec, const KvCapacity& capacity) {
  return kernels::KvCacheShape{capacity.num_gpu_blocks, capacity.block_size,
                               spec.num_key_value_heads, spec.HeadDim()};
}

}  // namespace

StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::Create(
    std::shared_ptr<const ModelWeights> weights, const CpuRunnerOptions& options) {
  SERVELAB_CHECK(weights != nullptr);
  const ModelSpec& spec = weights->config.spec;
  if (options.block_size < 1) {
    return InvalidArgument("cpu runner: block_size must be >= 1, got " +
                           std::to_string(options.block_size));
  }
  if (options.num_cpu_blocks < 0 || options.num_blocks < 0 || options.swap_space_bytes < 0) {
    return InvalidArgument("cpu runner: block counts and swap space must be >= 0");
  }
  KvCapacity capacity;
  capacity.block_size = options.block_size;
  capacity.bytes_per_block = spec.KvBytesPerBlock(options.block_size, sizeof(float));
  const int64_t host_blocks = options.num_cpu_blocks > 0
                                  ? options.num_cpu_blocks
                                  : options.swap_space_bytes / capacity.bytes_per_block;
  if (host_blocks > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("cpu runner: swap_space_bytes " +
                           std::to_string(options.swap_space_bytes) + " holds too many blocks");
  }
  capacity.num_cpu_blocks = static_cast<int32_t>(host_blocks);
  const int64_t blocks = options.num_blocks > 0 ? options.num_blocks
                                                : options.kv_cache_bytes / capacity.bytes_per_block;
  if (blocks < 1 || blocks > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("cpu runner: kv_cache_bytes " + std::to_string(options.kv_cache_bytes) +
                           " holds " + std::to_string(blocks) + " KV blocks of " +
                           std::to_string(capacity.bytes_per_block) + " bytes");
  }
  capacity.num_gpu_blocks = static_cast<int32_t>(blocks);
  SERVELAB_RETURN_IF_ERROR(CheckFitsHostMemory(
      static_cast<double>(capacity.bytes_per_block) * static_cast<double>(blocks + host_blocks),
      "cpu runner: the KV cache (" + std::to_string(blocks) + " blocks) and swap space (" +
          std::to_string(host_blocks) + " blocks)"));
  return std::unique_ptr<CpuModelRunner>(new CpuModelRunner(std::move(weights), capacity));
}

CpuModelRunner::CpuModelRunner(std::shared_ptr<const ModelWeights> weights,
                               const KvCapacity& capacity)
    : weights_(std::move(weights)), capacity_(capacity) {
  const ModelConfig& config = weights_->config;
  const ModelSpec& spec = config.spec;
  block_floats_ = int64_t{capacity_.block_size} * spec.KvDim();
  inv_freq_ = ModelRopeInvFreq(config);
  const auto layers = static_cast<size_t>(spec.num_hidden_layers);
  const auto device = static_cast<size_t>(capacity_.num_gpu_blocks * block_floats_);
  const auto host = static_cast<size_t>(capacity_.num_cpu_blocks * block_floats_);
  k_cache_.assign(layers, std::vector<float>(device, 0.0f));
  v_cache_.assign(layers, std::vector<float>(device, 0.0f));
  host_k_.assign(layers, std::vector<float>(host, 0.0f));
  host_v_.assign(layers, std::vector<float>(host, 0.0f));
}

void CpuModelRunner::CopyBlocks(std::span<const BlockCopy> copies,
                                const std::vector<std::vector<float>>& from,
                                std::vector<std::vector<float>>& to, int32_t from_blocks,
                                int32_t to_blocks, int64_t block_floats) {
  for (const BlockCopy& c : copies) {
    SERVELAB_CHECK_MSG(c.src >= 0 && c.src < from_blocks && c.dst >= 0 && c.dst < to_blocks,
                       "block copy " + std::to_string(c.src) + " -> " + std::to_string(c.dst));
    for (size_t layer = 0; layer < from.size(); ++layer) {
      std::memcpy(to[layer].data() + c.dst * block_floats,
                  from[layer].data() + c.src * block_floats,
                  static_cast<size_t>(block_floats) * sizeof(float));
    }
  }
}

void CpuModelRunner::SwapOut(std::span<const BlockCopy> copies) {
  CopyBlocks(copies, k_cache_, host_k_, capacity_.num_gpu_blocks, capacity_.num_cpu_blocks,
             block_floats_);
  CopyBlocks(copies, v_cache_, host_v_, capacity_.num_gpu_blocks, capacity_.num_cpu_blocks,
             block_floats_);
}

void CpuModelRunner::SwapIn(std::span<const BlockCopy> copies) {
  CopyBlocks(copies, host_k_, k_cache_, capacity_.num_cpu_blocks, capacity_.num_gpu_blocks,
             block_floats_);
  CopyBlocks(copies, host_v_, v_cache_, capacity_.num_cpu_blocks, capacity_.num_gpu_blocks,
             block_floats_);
}

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuModelRunner::Laps::Laps(OpTimer* timer) : timer_(timer) {
  if (timer_ != nullptr) last_ns_ = NowNs();
}

void CpuModelRunner::Laps::Lap(Op op) {
  if (timer_ == nullptr) return;
  const int64_t now = NowNs();
  timer_->Record(op, static_cast<double>(now - last_ns_) * 1e-9);
  last_ns_ = now;
}

void CpuModelRunner::Layer(int32_t index, int32_t num_tokens, Laps& laps) {
  const ModelSpec& spec = weights_->config.spec;
  const LayerWeights& w = weights_->layers[static_cast<size_t>(index)];
  const int32_t h = spec.hidden_size, heads = spec.num_attention_heads;
  const int32_t kv_heads = spec.num_key_value_heads, head_dim = spec.HeadDim();
  const auto eps = static_cast<float>(spec.rms_norm_eps);
  // residual holds the stream so far; hidden_ the last sublayer's output (layer 0: none).
  if (index == 0) {
    kcpu::RmsNorm(hidden_.data(), residual_.data(), w.input_norm.data(), num_tokens, h, eps);
  } else {
    kcpu::FusedAddRmsNorm(hidden_.data(), residual_.data(), w.input_norm.data(), num_tokens, h,
                          eps);
  }
  laps.Lap(Op::kInputNorm);
  Linear(hidden_.data(), num_tokens, w.q_proj, w.q_bias, q_);  // [T, heads * d]
  Linear(hidden_.data(), num_tokens, w.k_proj, w.k_bias, k_);  // [T, kv_heads * d]
  Linear(hidden_.data(), num_tokens, w.v_proj, w.v_bias, v_);  // [T, kv_heads * d]
  laps.Lap(Op::kQkvProj);
  kcpu::ApplyRope(q_.data(), k_.data(), pack_.positions.data(), inv_freq_.data(), num_tokens, heads,
                  kv_heads, head_dim);
  laps.Lap(Op::kRope);
  const kernels::KvCacheShape shape = CacheShape(spec, capacity_);
  float* k_cache = k_cache_[static_cast<size_t>(index)].data();
  float* v_cache = v_cache_[static_cast<size_t>(index)].data();
  kcpu::WriteKvCache(k_cache, v_cache, k_.data(), v_.data(), pack_.slot_mapping.data(), num_tokens,
                     shape);
  laps.Lap(Op::kKvCacheWrite);
  attn_.resize(q_.size());
  kcpu::PagedPrefillAttention(attn_.data(), q_.data(), k_cache, v_cache, pack_.block_tables.data(),
                              pack_.query_start_loc.data(), pack_.context_lens.data(), pack_.num_seqs,
                              num_tokens, heads, pack_.block_table_stride, pack_.max_query_len,
                              pack_.max_context_len,
                              1.0f / std::sqrt(static_cast<float>(head_dim)), shape);
  // The one attention kernel serves every step; a step of single tokens is a decode.
  laps.Lap(pack_.AllSingleToken() ? Op::kAttentionDecode : Op::kAttentionPrefill);
  Linear(attn_.data(), num_tokens, w.o_proj, w.o_bias, hidden_);  // [T, h]
  laps.Lap(Op::kOProj);
  kcpu::FusedAddRmsNorm(hidden_.data(), residual_.data(), w.post_attention_norm.data(), num_tokens,
                        h, eps);
  laps.Lap(Op::kPostAttentionNorm);
  if (spec.IsMoe()) {
    MixtureOfExperts(w, num_tokens);
    laps.Lap(Op::kMoeMlp);  // the router, the experts it picks, the shared expert
    return;
  }
  SwiGlu(hidden_.data(), num_tokens, w.mlp, hidden_, &laps);  // [T, h]
}

void CpuModelRunner::SwiGlu(const float* x, int32_t rows, const SwiGluWeights& mlp,
                            std::vector<float>& out, Laps* laps) {
  const Eigen::RowVectorXf no_bias;
  const auto width = static_cast<int32_t>(mlp.down_proj.cols());
  Linear(x, rows, mlp.gate_up_proj, no_bias, gate_up_);  // [rows, 2W]; x read, out free
  if (laps != nullptr) laps->Lap(Op::kGateUpProj);
  act_.resize(static_cast<size_t>(rows) * static_cast<size_t>(width));
  kcpu::SiluAndMul(act_.data(), gate_up_.data(), rows, width);
  if (laps != nullptr) laps->Lap(Op::kSiluAndMul);
  Linear(act_.data(), rows, mlp.down_proj, no_bias, out);  // [rows, h]
  if (laps != nullptr) laps->Lap(Op::kDownProj);
}

void CpuModelRunner::MixtureOfExperts(const LayerWeights& w, int32_t num_tokens) {
  const ModelSpec& spec = weights_->config.spec;
  const int32_t h = spec.hidden_size, experts = spec.num_experts, k = spec.num_experts_per_tok;
  const auto slots = static_cast<size_t>(num_tokens) * static_cast<size_t>(k);
  Linear(hidden_.data(), num_tokens, w.router, Eigen::RowVectorXf(), router_logits_);  // [T, E]
  topk_ids_.resize(slots);
  topk_weights_.resize(slots);
  kcpu::TopKSoftmaxRouting(topk_ids_.data(), topk_weights_.data(), router_logits_.data(),
                           num_tokens, experts, k, weights_->config.norm_topk_prob);
  expert_offsets_.resize(static_cast<size_t>(experts) + 1);
  expert_slots_.resize(slots);
  kcpu::GroupSlotsByExpert(expert_offsets_.data(), expert_slots_.data(), topk_ids_.data(),
                           num_tokens, experts, k);
  moe_out_.assign(static_cast<size_t>(num_tokens) * static_cast<size_t>(h), 0.0f);
  // Each expert runs once, on the rows routed to it (gathered), and adds its weighted
  // output back to theirs. Only the experts some token chose are read.
  int32_t run = 0, single_row = 0;
  for (int32_t e = 0; e < experts; ++e) {
    const int32_t begin = expert_offsets_[static_cast<size_t>(e)];
    const int32_t rows = expert_offsets_[static_cast<size_t>(e) + 1] - begin;
    if (rows == 0) continue;
    ++run;
    single_row += rows == 1 ? 1 : 0;
    expert_in_.resize(static_cast<size_t>(rows) * static_cast<size_t>(h));
    for (int32_t i = 0; i < rows; ++i) {
      const int32_t token = expert_slots_[static_cast<size_t>(begin + i)] / k;
      std::copy_n(hidden_.data() + static_cast<ptrdiff_t>(token) * h, h,
                  expert_in_.data() + static_cast<ptrdiff_t>(i) * h);
    }
    SwiGlu(expert_in_.data(), rows, w.experts[static_cast<size_t>(e)], expert_out_);
    for (int32_t i = 0; i < rows; ++i) {
      const int32_t slot = expert_slots_[static_cast<size_t>(begin + i)];
      const float weight = topk_weights_[static_cast<size_t>(slot)];
      float* dst = moe_out_.data() + static_cast<ptrdiff_t>(slot / k) * h;
      const float* src = expert_out_.data() + static_cast<ptrdiff_t>(i) * h;
      for (int32_t j = 0; j < h; ++j) dst[j] += weight * src[j];
    }
  }
  if (w.shared_expert_gate.size() > 0) {
    // Qwen2-MoE's shared expert, on every token, scaled by sigmoid(x . shared_expert_gate).
    SwiGlu(hidden_.data(), num_tokens, w.shared_expert, expert_out_);
    for (int32_t t = 0; t < num_tokens; ++t) {
      const Eigen::Map<const Eigen::RowVectorXf> x(hidden_.data() + static_cast<ptrdiff_t>(t) * h, h);
      const float gate = 1.0f / (1.0f + std::exp(-x.dot(w.shared_expert_gate)));
      float* dst = moe_out_.data() + static_cast<ptrdiff_t>(t) * h;
      const float* src = expert_out_.data() + static_cast<ptrdiff_t>(t) * h;
      for (int32_t j = 0; j < h; ++j) dst[j] += gate * src[j];
    }
  }
  routing_.run += run;
  routing_.single_row += single_row;
  ++routed_layers_;
  if (timer_ != nullptr) timer_->RecordExperts(run, single_row);
  hidden_.swap(moe_out_);
}

std::optional<ExpertsRun> CpuModelRunner::LastRouting() const {
  if (routed_layers_ == 0) return std::nullopt;
  return ExpertsRun{routing_.run / routed_layers_, routing_.single_row / routed_layers_};
}

Status CpuModelRunner::Execute(const StepPlan& plan, const TokenStore& tokens,
                               std::vector<float>& logits) {
  const ModelConfig& config = weights_->config;
  const ModelSpec& spec = config.spec;
  pack_.Build(plan, tokens, capacity_.block_size);
  routing_ = ExpertsRun{};
  routed_layers_ = 0;
  const int32_t num_tokens = pack_.NumTokens();
  const int32_t num_emitting = pack_.NumEmitting();
  logits.resize(static_cast<size_t>(num_emitting) * static_cast<size_t>(spec.vocab_size));
  SERVELAB_RETURN_IF_ERROR(CheckSlidingWindow(config, pack_, "cpu runner"));
  if (num_tokens == 0) return Status::Ok();
  const int32_t h = spec.hidden_size;
  const auto rows = static_cast<size_t>(num_tokens) * static_cast<size_t>(h);
  hidden_.resize(rows);
  residual_.resize(rows);
  Laps laps(timer_);
  kcpu::EmbeddingGather(residual_.data(), weights_->embed_tokens.data(), pack_.token_ids.data(),
                        num_tokens, spec.vocab_size, h);
  laps.Lap(Op::kEmbedding);
  for (int32_t layer = 0; layer < spec.num_hidden_layers; ++layer) Layer(layer, num_tokens, laps);
  if (num_emitting == 0) return Status::Ok();
  // The final norm and the LM head only for each emitting seq's last token.
  last_hidden_.resize(static_cast<size_t>(num_emitting) * static_cast<size_t>(h));
  last_residual_.resize(last_hidden_.size());
  for (int32_t e = 0; e < num_emitting; ++e) {
    const auto src = static_cast<size_t>(pack_.emit_rows[static_cast<size_t>(e)]) * h;
    const auto dst = static_cast<size_t>(e) * h;
    std::copy_n(hidden_.begin() + static_cast<std::ptrdiff_t>(src), h,
                last_hidden_.begin() + static_cast<std::ptrdiff_t>(dst));
    std::copy_n(residual_.begin() + static_cast<std::ptrdiff_t>(src), h,
                last_residual_.begin() + static_cast<std::ptrdiff_t>(dst));
  }
  kcpu::FusedAddRmsNorm(last_hidden_.data(), last_residual_.data(), weights_->final_norm.data(),
                        num_emitting, h, static_cast<float>(spec.rms_norm_eps));
  laps.Lap(Op::kFinalNorm);  // with the gather of the emitting rows
  Linear(last_hidden_.data(), num_emitting, weights_->LmHead(), Eigen::RowVectorXf(), logits);
  laps.Lap(Op::kLmHead);
  return Status::Ok();
}

}  // namespace servelab
