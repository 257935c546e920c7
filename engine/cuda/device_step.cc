#include "engine/cuda/device_step.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/cuda/runner_kernels.h"
#include "engine/rope_tables.h"
#include "kernels/cuda/kernels.h"

namespace servelab::engine_cuda {
namespace {

namespace kcuda = kernels::cuda;

// Where each array of a packed step sits in the device metadata buffer (and, identically,
// in the pinned staging buffer it is copied from). Offsets in bytes, 16-byte aligned.
struct MetaLayout {
  size_t token_ids = 0, positions = 0, slot_mapping = 0, query_start_loc = 0, context_lens = 0,
         block_tables = 0, emit_rows = 0, bytes = 0;

  MetaLayout(int64_t tokens, int64_t seqs, int64_t stride, int64_t emitting) {
    size_t at = 0;
    auto take = [&at](int64_t n, size_t size) {
      const size_t offset = at;
      at += static_cast<size_t>(RoundUp(std::max<int64_t>(n, 1) * static_cast<int64_t>(size), 16));
      return offset;
    };
    token_ids = take(tokens, 4);
    positions = take(tokens, 4);
    slot_mapping = take(tokens, 8);
    query_start_loc = take(seqs + 1, 4);
    context_lens = take(seqs, 4);
    block_tables = take(seqs * stride, 4);
    emit_rows = take(emitting, 4);
    bytes = at;
  }
};

template <typename T>
void Put(unsigned char* base, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(base + offset, values.data(), values.size() * sizeof(T));
}

// SERVELAB_MIXED_ATTENTION=prefill keeps every row of a mixed step on the prefill kernel,
// the decode rows too (to tell a fault of the split from another on a device; read once;
// the calibrated cost model counts the split). Anything else: the split.
bool PrefillAttentionOnly() {
  static const bool only = [] {
    const char* value = std::getenv("SERVELAB_MIXED_ATTENTION");
    return value != nullptr && std::strcmp(value, "prefill") == 0;
  }();
  return only;
}

}  // namespace

Status DeviceStep::Allocate(const StepSizes& sizes) {
  sizes_ = sizes;
  const ModelSpec& s = config_.spec;
  const int64_t rows = sizes.max_tokens, h = s.hidden_size, seqs = sizes.max_seqs;
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(hidden_, rows * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(residual_, rows * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(q_, rows * s.QDim(), "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(qkv_, rows * (s.QDim() + 2 * s.KvDim()), "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(attn_, rows * s.QDim(), "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(gate_up_, rows * 2 * s.intermediate_size, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(act_, rows * s.intermediate_size, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(last_hidden_, seqs * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(last_residual_, seqs * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(logits_, seqs * s.vocab_size, "logits"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(sampled_, seqs, "sampled ids"));
  SERVELAB_RETURN_IF_ERROR(memory_.AllocPinned(sampled_host_, seqs, "sampled ids"));
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(sample_inputs_, seqs * 20, "sampling inputs"));
  SERVELAB_RETURN_IF_ERROR(memory_.AllocPinned(sample_staging_, seqs * 20, "sampling inputs"));
  const std::vector<float> freqs = ModelRopeInvFreq(config_);
  SERVELAB_RETURN_IF_ERROR(
      memory_.Alloc(inv_freq_, static_cast<int64_t>(freqs.size()), "inv_freq"));
  SERVELAB_CUDA_RETURN(
      cudaMemcpy(inv_freq_, freqs.data(), freqs.size() * sizeof(float), cudaMemcpyHostToDevice),
      "uploading inv_freq");
  // Split-KV scratch for any decode of up to max_seqs sequences and max_model_len tokens,
  // graph buckets included (they pass a bucket <= max_model_len as the longest context; the
  // size covers every context up to it). The shape matters through kv heads and head_dim.
  kernels::KvCacheShape shape{1, sizes.block_size, s.num_key_value_heads, s.HeadDim()};
  decode_workspace_bytes_ = kcuda::PagedDecodeAttentionWorkspaceBytes(
      sizes.max_seqs, s.num_attention_heads, sizes.max_model_len, shape);
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(
      decode_workspace_, static_cast<int64_t>(decode_workspace_bytes_ / sizeof(float)) + 1,
      "the split-KV workspace"));
  const size_t meta_bytes = MetaLayout(rows, seqs, sizes.max_stride, seqs).bytes;
  SERVELAB_RETURN_IF_ERROR(memory_.Alloc(meta_, static_cast<int64_t>(meta_bytes), "step metadata"));
  SERVELAB_RETURN_IF_ERROR(
      memory_.AllocPinned(staging_, static_cast<int64_t>(meta_bytes), "step metadata"));
  return Status::Ok();
}

// In cuBLAS's column-major terms y^T = W * x^T, i.e. C (out x rows) = op(A)=A^T (A: in x
// out) * B (in x rows), "TN".
void DeviceStep::Gemm(const bf16* x, int32_t rows, const bf16* w, int32_t out, int32_t in,
                      void* y, cudaDataType_t y_type) {
  const float alpha = 1.0f, beta = 0.0f;
  const CublasLibrary& blas = context_.Blas();
  const cublasStatus_t s = blas.gemm_ex(context_.Cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in,
                                        &alpha, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in, &beta, y,
                                        y_type, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS && error_.ok()) {
    error_ =
        Internal(std::string("cuda runner: cublasGemmEx ") + std::to_string(rows) + "x" +
                 std::to_string(out) + "x" + std::to_string(in) + ": " + blas.status_name(s));
  }
}

OpEvents::~OpEvents() {
  if (start_ != nullptr) cudaEventDestroy(start_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

Status OpEvents::Init(int32_t capacity) {
  SERVELAB_CUDA_RETURN(cudaEventCreate(&start_), "creating op timing events");
  events_.resize(static_cast<size_t>(capacity), nullptr);
  ops_.resize(static_cast<size_t>(capacity), Op::kEmbedding);
  for (cudaEvent_t& e : events_) {
    SERVELAB_CUDA_RETURN(cudaEventCreate(&e), "creating op timing events");
  }
  return Status::Ok();
}

void OpEvents::Start(cudaStream_t stream) {
  used_ = 0;
  overflow_ = false;
  record_error_ = cudaEventRecord(start_, stream);
}

void OpEvents::Mark(Op op, cudaStream_t stream) {
  if (used_ == events_.size()) {
    overflow_ = true;
    return;
  }
  ops_[used_] = op;
  const cudaError_t err = cudaEventRecord(events_[used_++], stream);
  if (record_error_ == cudaSuccess) record_error_ = err;
}

Status OpEvents::Report(const std::function<void(Op, double)>& record) {
  const size_t used = used_;
  used_ = 0;  // spent, whatever follows
  if (used == 0) return Status::Ok();
  SERVELAB_CUDA_RETURN(record_error_, "recording op timing events");
  SERVELAB_CUDA_RETURN(cudaEventSynchronize(events_[used - 1]), "waiting for op timing events");
  cudaEvent_t previous = start_;
  for (size_t i = 0; i < used; ++i) {
    float ms = 0;
    SERVELAB_CUDA_RETURN(cudaEventElapsedTime(&ms, previous, events_[i]), "reading op timing events");
    record(ops_[i], static_cast<double>(ms) * 1e-3);
    previous = events_[i];
  }
  if (overflow_) return Internal("cuda runner: more ops in a step than op timing events");
  return Status::Ok();
}

void DeviceStep::Forward(const ForwardShape& f, OpEvents* events) {
  const ModelSpec& s = config_.spec;
  const int32_t T = f.tokens, h = s.hidden_size, heads = s.num_attention_heads;
  const int32_t head_dim = s.HeadDim();
  const auto qd = static_cast<int32_t>(s.QDim()), kvd = static_cast<int32_t>(s.KvDim());
  const int32_t inter = s.intermediate_size;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::KvCacheShape shape = kv_.CacheShape();
  const cudaStream_t stream = context_.Stream();
  const std::vector<LayerPointers>& layers = weights_.Layers();
  auto mark = [&](Op op) {
    if (events != nullptr) events->Mark(op, stream);
  };

  if (events != nullptr) events->Start(stream);
  kcuda::EmbeddingGather(residual_, weights_.Embed(), f.token_ids, T, s.vocab_size, h, stream);
  mark(Op::kEmbedding);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerPointers& w = layers[i];
    if (i == 0) {
      kcuda::RmsNorm(hidden_, residual_, w.input_norm, T, h, eps, stream);
    } else {
      kcuda::FusedAddRmsNorm(hidden_, residual_, w.input_norm, T, h, eps, stream);
    }
    mark(Op::kInputNorm);
    Gemm(hidden_, T, w.qkv_proj, qd + 2 * kvd, h, qkv_, CUDA_R_16BF);
    if (w.qkv_bias != nullptr) AddBias(qkv_, w.qkv_bias, T, qd + 2 * kvd, stream);
    mark(Op::kQkvProj);
    QkvRopeKvWrite(q_, kv_.K(i), kv_.V(i), qkv_, f.positions, inv_freq_, f.slot_mapping, T, heads,
                   shape, stream);
    mark(Op::kRope);  // with the KV-cache write, fused
    if (f.decode_attention) {
      kcuda::PagedDecodeAttention(attn_, q_, kv_.K(i), kv_.V(i), f.block_tables, f.context_lens,
                                  f.seqs, heads, f.block_table_stride, f.max_context_len, scale,
                                  shape, decode_workspace_, decode_workspace_bytes_, stream);
    } else {
      // The decode rows first, one token each at packed rows 0..d-1 (the decode kernel's
      // row of seq i is i); the prefill kernel takes the rest by their query offsets.
      const int32_t d = f.decode_prefix;
      if (d > 0) {
        kcuda::PagedDecodeAttention(attn_, q_, kv_.K(i), kv_.V(i), f.block_tables, f.context_lens,
                                    d, heads, f.block_table_stride, f.decode_prefix_max_context,
                                    scale, shape, decode_workspace_, decode_workspace_bytes_, stream);
      }
      if (d < f.seqs) {
        kcuda::PagedPrefillAttention(
            attn_, q_, kv_.K(i), kv_.V(i), f.block_tables + int64_t{d} * f.block_table_stride,
            f.query_start_loc + d, f.context_lens + d, f.seqs - d, T - d, heads,
            f.block_table_stride, f.max_query_len, f.max_context_len, scale, shape, stream);
      }
    }
    mark(f.decode_attention ? Op::kAttentionDecode : Op::kAttentionPrefill);
    Gemm(attn_, T, w.o_proj, h, qd, hidden_, CUDA_R_16BF);
    if (w.o_bias != nullptr) AddBias(hidden_, w.o_bias, T, h, stream);
    mark(Op::kOProj);
    kcuda::FusedAddRmsNorm(hidden_, residual_, w.post_attention_norm, T, h, eps, stream);
    mark(Op::kPostAttentionNorm);
    Gemm(hidden_, T, w.gate_up_proj, 2 * inter, h, gate_up_, CUDA_R_16BF);
    mark(Op::kGateUpProj);
    kcuda::SiluAndMul(act_, gate_up_, T, inter, stream);
    mark(Op::kSiluAndMul);
    Gemm(act_, T, w.down_proj, h, inter, hidden_, CUDA_R_16BF);
    mark(Op::kDownProj);
  }
  if (f.emitting == 0) return;
  bf16* x = hidden_;
  bf16* res = residual_;
  if (!f.emit_all_rows) {
    GatherRows(last_hidden_, hidden_, f.emit_rows, f.emitting, h, stream);
    GatherRows(last_residual_, residual_, f.emit_rows, f.emitting, h, stream);
    x = last_hidden_;
    res = last_residual_;
  }
  kcuda::FusedAddRmsNorm(x, res, weights_.FinalNorm(), f.emitting, h, eps, stream);
  mark(Op::kFinalNorm);  // with the gather of the emitting rows
  Gemm(x, f.emitting, weights_.LmHead(), s.vocab_size, h, logits_, CUDA_R_32F);
  mark(Op::kLmHead);
  if (f.sample_greedy) {
    kcuda::GreedySample(sampled_, logits_, f.emitting, s.vocab_size, stream);
    mark(Op::kSampling);
  }
}

Status DeviceStep::SampleTopP(int32_t rows, const SamplingParams& params,
                              std::span<const double> uniforms) {
  SERVELAB_CHECK(static_cast<int32_t>(uniforms.size()) == rows && rows <= sizes_.max_seqs);
  if (rows == 0) return Status::Ok();
  const size_t n = static_cast<size_t>(sizes_.max_seqs);
  auto* u = reinterpret_cast<double*>(sample_staging_);
  auto* temperature = reinterpret_cast<float*>(sample_staging_ + 8 * n);
  auto* top_p = reinterpret_cast<float*>(sample_staging_ + 12 * n);
  auto* top_k = reinterpret_cast<int32_t*>(sample_staging_ + 16 * n);
  for (int32_t i = 0; i < rows; ++i) {
    u[i] = uniforms[static_cast<size_t>(i)];
    temperature[i] = params.temperature;
    top_p[i] = params.top_p;
    top_k[i] = params.top_k;
  }
  const cudaStream_t stream = context_.Stream();
  SERVELAB_CUDA_RETURN(
      cudaMemcpyAsync(sample_inputs_, sample_staging_, 20 * n, cudaMemcpyHostToDevice, stream),
      "uploading sampling inputs");
  kcuda::TopPSample(sampled_, logits_, reinterpret_cast<const float*>(sample_inputs_ + 8 * n),
                    reinterpret_cast<const int32_t*>(sample_inputs_ + 16 * n),
                    reinterpret_cast<const float*>(sample_inputs_ + 12 * n),
                    reinterpret_cast<const double*>(sample_inputs_), rows, config_.spec.vocab_size,
                    stream);
  return Status::Ok();
}

Status DeviceStep::Stage(const StepPack& pack, int32_t rows, int32_t seqs, int32_t stride,
                         ForwardShape& f) {
  const MetaLayout layout(rows, seqs, stride, pack.NumEmitting());
  Put(staging_, layout.token_ids, pack.token_ids);
  Put(staging_, layout.positions, pack.positions);
  Put(staging_, layout.slot_mapping, pack.slot_mapping);
  Put(staging_, layout.query_start_loc, pack.query_start_loc);
  Put(staging_, layout.context_lens, pack.context_lens);
  Put(staging_, layout.emit_rows, pack.emit_rows);
  // Block tables at `stride` entries per seq (the pack's are max_blocks apart); rows past
  // the pack's seqs (graph padding) point at block 0.
  auto* tables = reinterpret_cast<int32_t*>(staging_ + layout.block_tables);
  std::fill_n(tables, static_cast<size_t>(seqs) * static_cast<size_t>(stride), 0);
  for (int32_t r = 0; r < pack.num_seqs; ++r) {
    std::copy_n(
        pack.block_tables.begin() + static_cast<std::ptrdiff_t>(r) * pack.block_table_stride,
        pack.max_blocks, tables + static_cast<std::ptrdiff_t>(r) * stride);
  }
  SERVELAB_CUDA_RETURN(
      cudaMemcpyAsync(meta_, staging_, layout.bytes, cudaMemcpyHostToDevice, context_.Stream()),
      "uploading the step");
  f.tokens = rows;
  f.seqs = seqs;
  f.emitting = pack.NumEmitting();
  f.max_query_len = pack.max_query_len;
  f.max_context_len = pack.max_context_len;
  f.block_table_stride = stride;
  f.decode_attention = pack.AllSingleToken();
  f.decode_prefix = 0;
  f.decode_prefix_max_context = 0;
  if (!f.decode_attention && !PrefillAttentionOnly()) {
    while (f.decode_prefix < pack.num_seqs &&
           pack.query_start_loc[f.decode_prefix + 1] - pack.query_start_loc[f.decode_prefix] == 1) {
      f.decode_prefix_max_context =
          std::max(f.decode_prefix_max_context, pack.context_lens[f.decode_prefix]);
      ++f.decode_prefix;
    }
  }
  f.token_ids = reinterpret_cast<const int32_t*>(meta_ + layout.token_ids);
  f.positions = reinterpret_cast<const int32_t*>(meta_ + layout.positions);
  f.slot_mapping = reinterpret_cast<const int64_t*>(meta_ + layout.slot_mapping);
  f.query_start_loc = reinterpret_cast<const int32_t*>(meta_ + layout.query_start_loc);
  f.context_lens = reinterpret_cast<const int32_t*>(meta_ + layout.context_lens);
  f.block_tables = reinterpret_cast<const int32_t*>(meta_ + layout.block_tables);
  f.emit_rows = reinterpret_cast<const int32_t*>(meta_ + layout.emit_rows);
  return Status::Ok();
}

Status DeviceStep::StageDecodeGraph(StepPack& pack, int32_t B, int32_t bucket, ForwardShape& f) {
  const int32_t S = pack.num_seqs;
  const int32_t stride = (bucket + sizes_.block_size - 1) / sizes_.block_size;
  pack.token_ids.resize(static_cast<size_t>(B), 0);
  pack.positions.resize(static_cast<size_t>(B), 0);
  pack.slot_mapping.resize(static_cast<size_t>(B), -1);
  for (int32_t i = S + 1; i <= B; ++i) pack.query_start_loc.push_back(i);
  pack.context_lens.resize(static_cast<size_t>(B), 1);
  SERVELAB_RETURN_IF_ERROR(Stage(pack, B, B, stride, f));
  f.emitting = B;
  f.max_query_len = 1;
  f.max_context_len = bucket;  // baked into the graph: the decode kernel's partition count
  f.decode_attention = true;
  f.emit_all_rows = true;
  f.sample_greedy = true;  // cheap; read only when the caller samples greedily
  return Status::Ok();
}

}  // namespace servelab::engine_cuda
