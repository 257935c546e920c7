#include "engine/cuda/cuda_model_runner.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/cuda/runner_kernels.h"
#include "engine/rope_tables.h"
#include "engine/safetensors.h"
#include "engine/step_pack.h"
#include "engine/weight_layout.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/kernels.h"

namespace servelab {
namespace {

namespace kcuda = kernels::cuda;
using bf16 = __nv_bfloat16;

// Also clears the thread's last error: a handled failure (out of memory, a failed capture)
// must not abort the next kernel launch's check, which peeks at it.
Status CudaError(cudaError_t err, const std::string& what) {
  cudaGetLastError();
  return Internal("cuda runner: " + what + ": " + cudaGetErrorString(err));
}

#define SERVELAB_CUDA_RETURN(expr, what)                                 \
  do {                                                                   \
    const cudaError_t servelab_e_ = (expr);                              \
    if (servelab_e_ != cudaSuccess) return CudaError(servelab_e_, what); \
  } while (0)

// Memory owned for the runner's lifetime: device memory, or pinned host memory (swap pool,
// staging), which asynchronous copies need.
class OwnedMemory {
 public:
  explicit OwnedMemory(bool pinned) : pinned_(pinned) {}
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  OwnedMemory(OwnedMemory&& o) noexcept
      : pinned_(o.pinned_), ptr_(std::exchange(o.ptr_, nullptr)) {}
  ~OwnedMemory() {
    if (ptr_ != nullptr) pinned_ ? cudaFreeHost(ptr_) : cudaFree(ptr_);
  }
  Status Allocate(size_t bytes, const std::string& what) {
    SERVELAB_CHECK(ptr_ == nullptr);
    const size_t n = std::max<size_t>(bytes, 16);
    const cudaError_t err =
        pinned_ ? cudaHostAlloc(&ptr_, n, cudaHostAllocDefault) : cudaMalloc(&ptr_, n);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      return CudaError(err, (pinned_ ? "pinning " : "allocating ") + std::to_string(bytes) +
                                (pinned_ ? " host bytes for " : " bytes for ") + what);
    }
    return Status::Ok();
  }
  void* get() const { return ptr_; }

 private:
  bool pinned_;
  void* ptr_ = nullptr;
};

constexpr int64_t kGraphReserveBytes = int64_t{256} << 20;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

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

struct LayerPointers {
  // q_proj, k_proj and v_proj stacked ([qd + 2 kvd, h]; biases likewise): one GEMM.
  bf16 *qkv_proj = nullptr, *o_proj = nullptr;
  bf16 *qkv_bias = nullptr, *o_bias = nullptr;
  bf16 *gate_up_proj = nullptr, *down_proj = nullptr;
  bf16 *input_norm = nullptr, *post_attention_norm = nullptr;
};

// What one forward pass runs over: the step's sizes and the metadata's device addresses.
struct ForwardShape {
  int32_t tokens = 0, seqs = 0, emitting = 0;
  int32_t max_query_len = 0, max_context_len = 0, block_table_stride = 0;
  bool decode_attention = false;  // every seq brings one token
  bool emit_all_rows = false;     // emitting rows are exactly rows 0..tokens-1: no gather
  bool sample_greedy = false;     // append GreedySample into the sampled-ids buffer
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int32_t* query_start_loc = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* emit_rows = nullptr;
};

}  // namespace

struct CudaModelRunner::Impl {
  ModelConfig config;
  CudaRunnerOptions options;
  KvCapacity capacity;
  std::string device_name;
  int32_t max_model_len = 0;
  int32_t max_tokens = 0;  // activation rows
  int32_t max_seqs = 0;
  int32_t max_stride = 0;  // block-table entries per seq at max_model_len
  int64_t weight_bytes = 0;
  int64_t block_elems = 0;  // bf16 per block per layer, K or V
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::vector<OwnedMemory> owned;  // device and pinned host allocations

  bf16* embed = nullptr;
  bf16* lm_head = nullptr;
  bf16* final_norm = nullptr;
  std::vector<LayerPointers> layers;
  float* inv_freq = nullptr;
  std::vector<bf16*> k_cache, v_cache;  // per layer, into one pool allocation
  bf16* host_pool = nullptr;            // pinned swap pool, the same array order

  // Activations [rows, width], bf16, sized for max_tokens rows (last_*: max_seqs).
  bf16 *hidden = nullptr, *residual = nullptr, *q = nullptr, *qkv = nullptr, *attn = nullptr,
       *gate_up = nullptr, *act = nullptr;
  bf16 *last_hidden = nullptr, *last_residual = nullptr;
  float* logits = nullptr;          // [max_seqs, vocab]
  int32_t* sampled = nullptr;       // [max_seqs] device
  int32_t* sampled_host = nullptr;  // [max_seqs] pinned
  // TopPSample's per-row inputs: uniforms (f64), temperatures, top_ps (f32), top_ks (i32);
  // device, and a pinned staging copy of the same layout.
  unsigned char* sample_inputs = nullptr;
  unsigned char* sample_staging = nullptr;
  float* decode_workspace = nullptr;
  size_t decode_workspace_bytes = 0;
  unsigned char* meta = nullptr;     // device metadata, MetaLayout at max sizes
  unsigned char* staging = nullptr;  // pinned, same size
  size_t meta_bytes = 0;

  StepPack pack;
  Status pending;        // a swap copy failure, reported by the next step
  Status forward_error;  // the first cuBLAS failure inside a forward pass
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs;  // (batch, context bucket)
  bool last_step_used_graph = false;

  ~Impl() {
    for (auto& [key, exec] : graphs) cudaGraphExecDestroy(exec);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  template <typename T>
  Status Alloc(T*& out, int64_t count, const std::string& what, bool pinned = false) {
    OwnedMemory& m = owned.emplace_back(pinned);
    SERVELAB_RETURN_IF_ERROR(m.Allocate(static_cast<size_t>(count) * sizeof(T), what));
    out = static_cast<T*>(m.get());
    return Status::Ok();
  }
  template <typename T>
  Status AllocPinned(T*& out, int64_t count, const std::string& what) {
    return Alloc(out, count, what, /*pinned=*/true);
  }

  const ModelSpec& spec() const { return config.spec; }
  kernels::KvCacheShape CacheShape() const {
    return kernels::KvCacheShape{capacity.num_gpu_blocks, capacity.block_size,
                                 spec().num_key_value_heads, spec().HeadDim()};
  }

  Status Init(int32_t device);
  Status AllocateWeights(bool tied);
  Status UploadWeights(const ModelWeights& weights);
  // Where checkpoint tensor `name` goes on the device; null for a name the layout lacks.
  bf16* Destination(const std::string& name) const;
  Status UploadCheckpoint(const SafetensorsFile& file);
  Status RandomWeights(uint64_t seed, double init_std);
  Status AllocateWorkingSet();
  Status AllocateKvPools();
  void Gemm(const bf16* x, int32_t rows, const bf16* w, int32_t out, int32_t in, void* y,
            cudaDataType_t y_type);
  void Forward(const ForwardShape& shape);
  // sample: nullptr = logits only; else greedy (temperature <= 0) or TopPSample with
  // `uniforms` as the draws, token ids into sampled_host.
  Status RunStep(const StepPlan& plan, const TokenStore& tokens, const SamplingParams* sample,
                 std::span<const double> uniforms);
  Status RunStepUnsynced(const StepPlan& plan, const TokenStore& tokens,
                         const SamplingParams* sample, std::span<const double> uniforms);
  // Uploads the pack as `rows` tokens and `seqs` seqs with block tables `stride` apart;
  // fills `f` with the sizes and the device addresses.
  Status Stage(int32_t rows, int32_t seqs, int32_t stride, ForwardShape& f);
  Status Capture(const ForwardShape& f, cudaGraphExec_t* exec);
  // Pads the pack (a pure decode of S <= B seqs) to the graph's B rows and stages it.
  Status StageDecodeGraph(int32_t B, int32_t bucket, ForwardShape& f);
  // The graph for f's (rows, context bucket), captured now if it does not exist yet.
  Status DecodeGraph(const ForwardShape& f, cudaGraphExec_t* exec);
  Status CaptureDecodeGraphs();
  Status SampleTopP(int32_t rows, const SamplingParams& params, std::span<const double> uniforms);
  Status Finish(const std::string& what);
  void CopyBlocks(std::span<const BlockCopy> copies, bool to_host);
};

Status CudaModelRunner::Impl::Init(int32_t device) {
  std::string why;
  if (!CudaDeviceUsable(&why)) return Internal("cuda runner: " + why);
  SERVELAB_CUDA_RETURN(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  cudaDeviceProp prop{};
  SERVELAB_CUDA_RETURN(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  device_name = prop.name;
  SERVELAB_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  const cublasStatus_t s = cublasCreate(&cublas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublas = nullptr;
    return Internal(std::string("cuda runner: cublasCreate: ") + cublasGetStatusName(s));
  }
  cublasSetStream(cublas, stream);
  // A workspace of our own: cuBLAS then allocates nothing inside graph captures.
  constexpr int64_t kCublasWorkspace = int64_t{32} << 20;
  unsigned char* workspace = nullptr;
  SERVELAB_RETURN_IF_ERROR(Alloc(workspace, kCublasWorkspace, "the cuBLAS workspace"));
  cublasSetWorkspace(cublas, workspace, kCublasWorkspace);
  return Status::Ok();
}

Status CudaModelRunner::Impl::AllocateWeights(bool tied) {
  const ModelSpec& s = spec();
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  SERVELAB_RETURN_IF_ERROR(Alloc(embed, int64_t{s.vocab_size} * h, "embed_tokens"));
  if (tied) {
    lm_head = embed;
  } else {
    SERVELAB_RETURN_IF_ERROR(Alloc(lm_head, int64_t{s.vocab_size} * h, "lm_head"));
  }
  SERVELAB_RETURN_IF_ERROR(Alloc(final_norm, h, "norm"));
  layers.resize(static_cast<size_t>(s.num_hidden_layers));
  for (LayerPointers& l : layers) {
    SERVELAB_RETURN_IF_ERROR(Alloc(l.qkv_proj, (qd + 2 * kvd) * h, "q/k/v_proj"));
    SERVELAB_RETURN_IF_ERROR(Alloc(l.o_proj, h * qd, "o_proj"));
    SERVELAB_RETURN_IF_ERROR(Alloc(l.gate_up_proj, 2 * inter * h, "gate_up_proj"));
    SERVELAB_RETURN_IF_ERROR(Alloc(l.down_proj, h * inter, "down_proj"));
    SERVELAB_RETURN_IF_ERROR(Alloc(l.input_norm, h, "input_layernorm"));
    SERVELAB_RETURN_IF_ERROR(Alloc(l.post_attention_norm, h, "post_attention_layernorm"));
    if (s.attention_bias) {
      SERVELAB_RETURN_IF_ERROR(Alloc(l.qkv_bias, qd + 2 * kvd, "q/k/v_proj.bias"));
    }
    if (config.o_proj_bias) SERVELAB_RETURN_IF_ERROR(Alloc(l.o_bias, h, "o_proj.bias"));
  }
  const int64_t per_layer = (qd * h + 2 * kvd * h + h * qd + 3 * inter * h + 2 * h) +
                            (s.attention_bias ? qd + 2 * kvd : 0) + (config.o_proj_bias ? h : 0);
  weight_bytes =
      2 * (int64_t{s.vocab_size} * h * (tied ? 1 : 2) + h + per_layer * s.num_hidden_layers);
  return Status::Ok();
}

Status CudaModelRunner::Impl::UploadWeights(const ModelWeights& w) {
  // By checkpoint name, so Destination alone decides where (and how stacked) each goes.
  std::vector<bf16> host;
  auto upload = [&](const std::string& name, const float* src, int64_t n) -> Status {
    bf16* dst = Destination(name);
    SERVELAB_CHECK_MSG(dst != nullptr, "no device place for " + name);
    host.resize(static_cast<size_t>(n));
    kcuda::F32ToBf16(host.data(), src, static_cast<size_t>(n));
    SERVELAB_CUDA_RETURN(
        cudaMemcpy(dst, host.data(), static_cast<size_t>(n) * sizeof(bf16), cudaMemcpyHostToDevice),
        "uploading " + name);
    return Status::Ok();
  };
  auto vec = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  SERVELAB_RETURN_IF_ERROR(
      upload("model.embed_tokens.weight", w.embed_tokens.data(), w.embed_tokens.size()));
  if (lm_head != embed) {
    SERVELAB_RETURN_IF_ERROR(upload("lm_head.weight", w.lm_head.data(), w.lm_head.size()));
  }
  SERVELAB_RETURN_IF_ERROR(upload("model.norm.weight", w.final_norm.data(), vec(w.final_norm)));
  const int64_t gate = int64_t{spec().intermediate_size} * spec().hidden_size;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "self_attn.q_proj.weight", l.q_proj.data(), l.q_proj.size()));
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "self_attn.k_proj.weight", l.k_proj.data(), l.k_proj.size()));
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "self_attn.v_proj.weight", l.v_proj.data(), l.v_proj.size()));
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "self_attn.o_proj.weight", l.o_proj.data(), l.o_proj.size()));
    if (layers[i].qkv_bias != nullptr) {
      SERVELAB_RETURN_IF_ERROR(
          upload(p + "self_attn.q_proj.bias", l.q_bias.data(), l.q_bias.size()));
      SERVELAB_RETURN_IF_ERROR(
          upload(p + "self_attn.k_proj.bias", l.k_bias.data(), l.k_bias.size()));
      SERVELAB_RETURN_IF_ERROR(
          upload(p + "self_attn.v_proj.bias", l.v_bias.data(), l.v_bias.size()));
    }
    if (layers[i].o_bias != nullptr) {
      SERVELAB_RETURN_IF_ERROR(
          upload(p + "self_attn.o_proj.bias", l.o_bias.data(), l.o_bias.size()));
    }
    // ModelWeights stacks gate and up already: its halves are the two checkpoint tensors.
    SERVELAB_RETURN_IF_ERROR(upload(p + "mlp.gate_proj.weight", l.gate_up_proj.data(), gate));
    SERVELAB_RETURN_IF_ERROR(upload(p + "mlp.up_proj.weight", l.gate_up_proj.data() + gate, gate));
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "mlp.down_proj.weight", l.down_proj.data(), l.down_proj.size()));
    SERVELAB_RETURN_IF_ERROR(
        upload(p + "input_layernorm.weight", l.input_norm.data(), vec(l.input_norm)));
    SERVELAB_RETURN_IF_ERROR(upload(p + "post_attention_layernorm.weight",
                                    l.post_attention_norm.data(), vec(l.post_attention_norm)));
  }
  return Status::Ok();
}

bf16* CudaModelRunner::Impl::Destination(const std::string& name) const {
  const ModelSpec& s = spec();
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  if (name == "model.embed_tokens.weight") return embed;
  if (name == "lm_head.weight") return lm_head == embed ? nullptr : lm_head;
  if (name == "model.norm.weight") return final_norm;
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return nullptr;
  size_t at = kLayers.size();
  size_t index = 0;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9')
    index = index * 10 + (name[at++] - '0');
  if (at == kLayers.size() || at >= name.size() || name[at] != '.' || index >= layers.size()) {
    return nullptr;
  }
  const std::string_view rest = std::string_view(name).substr(at + 1);
  const LayerPointers& l = layers[index];
  // q, k, v stacked in that order (weights by rows of h, biases by elements); gate then up.
  if (rest == "self_attn.q_proj.weight") return l.qkv_proj;
  if (rest == "self_attn.k_proj.weight") return l.qkv_proj + qd * h;
  if (rest == "self_attn.v_proj.weight") return l.qkv_proj + (qd + kvd) * h;
  if (rest == "self_attn.o_proj.weight") return l.o_proj;
  if (rest == "self_attn.q_proj.bias") return l.qkv_bias;
  if (rest == "self_attn.k_proj.bias") return l.qkv_bias == nullptr ? nullptr : l.qkv_bias + qd;
  if (rest == "self_attn.v_proj.bias")
    return l.qkv_bias == nullptr ? nullptr : l.qkv_bias + qd + kvd;
  if (rest == "self_attn.o_proj.bias") return l.o_bias;
  if (rest == "mlp.gate_proj.weight") return l.gate_up_proj;
  if (rest == "mlp.up_proj.weight") return l.gate_up_proj + inter * h;
  if (rest == "mlp.down_proj.weight") return l.down_proj;
  if (rest == "input_layernorm.weight") return l.input_norm;
  if (rest == "post_attention_layernorm.weight") return l.post_attention_norm;
  return nullptr;
}

Status CudaModelRunner::Impl::UploadCheckpoint(const SafetensorsFile& file) {
  // Every tensor the layout names, checked against its shape; bf16 bytes go to the device
  // as they are (no float32 copy of the model on the host), F32 and F16 are rounded to bf16
  // as ModelWeights + Create would round them (the same bits).
  std::vector<float> f32;
  std::vector<bf16> host;
  for (const TensorSpec& spec : HfWeightLayout(config, DType::kBf16)) {
    StatusOr<const TensorView*> view = file.Get(spec.name, spec.shape);
    if (!view.ok()) return view.status();
    bf16* dst = Destination(spec.name);
    SERVELAB_CHECK_MSG(dst != nullptr, "no device place for " + spec.name);
    const TensorView& t = **view;
    const auto n = static_cast<size_t>(t.NumElements());
    const void* src = t.data;
    if (t.dtype != DType::kBf16) {
      f32.resize(n);
      ToFloat32(t, f32);
      host.resize(n);
      kcuda::F32ToBf16(host.data(), f32.data(), n);
      src = host.data();
    }
    SERVELAB_CUDA_RETURN(cudaMemcpy(dst, src, n * sizeof(bf16), cudaMemcpyHostToDevice),
                         "uploading " + spec.name);
  }
  return Status::Ok();
}

Status CudaModelRunner::Impl::RandomWeights(uint64_t seed, double init_std) {
  const ModelSpec& s = spec();
  const auto sd = static_cast<float>(init_std);
  const int64_t h = s.hidden_size, qd = s.QDim(), kvd = s.KvDim(), inter = s.intermediate_size;
  uint64_t tensor = 0;  // each tensor its own stream, in a fixed order
  auto fill = [&](bf16* p, int64_t n, float mean) {
    engine_cuda::FillRandomBf16(p, n, seed, tensor++, mean, sd, stream);
  };
  fill(embed, int64_t{s.vocab_size} * h, 0.0f);
  if (lm_head != embed) fill(lm_head, int64_t{s.vocab_size} * h, 0.0f);
  fill(final_norm, h, 1.0f);
  for (LayerPointers& l : layers) {
    fill(l.qkv_proj, (qd + 2 * kvd) * h, 0.0f);
    fill(l.o_proj, h * qd, 0.0f);
    fill(l.gate_up_proj, 2 * inter * h, 0.0f);
    fill(l.down_proj, h * inter, 0.0f);
    fill(l.input_norm, h, 1.0f);
    fill(l.post_attention_norm, h, 1.0f);
    if (l.qkv_bias != nullptr) fill(l.qkv_bias, qd + 2 * kvd, 0.0f);
    if (l.o_bias != nullptr) fill(l.o_bias, h, 0.0f);
  }
  SERVELAB_CUDA_RETURN(cudaStreamSynchronize(stream), "generating random weights");
  return Status::Ok();
}

Status CudaModelRunner::Impl::AllocateWorkingSet() {
  const ModelSpec& s = spec();
  const int64_t rows = max_tokens, h = s.hidden_size;
  SERVELAB_RETURN_IF_ERROR(Alloc(hidden, rows * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(residual, rows * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(q, rows * s.QDim(), "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(qkv, rows * (s.QDim() + 2 * s.KvDim()), "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(attn, rows * s.QDim(), "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(gate_up, rows * 2 * s.intermediate_size, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(act, rows * s.intermediate_size, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(last_hidden, int64_t{max_seqs} * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(last_residual, int64_t{max_seqs} * h, "activations"));
  SERVELAB_RETURN_IF_ERROR(Alloc(logits, int64_t{max_seqs} * s.vocab_size, "logits"));
  SERVELAB_RETURN_IF_ERROR(Alloc(sampled, max_seqs, "sampled ids"));
  SERVELAB_RETURN_IF_ERROR(AllocPinned(sampled_host, max_seqs, "sampled ids"));
  SERVELAB_RETURN_IF_ERROR(Alloc(sample_inputs, int64_t{max_seqs} * 20, "sampling inputs"));
  SERVELAB_RETURN_IF_ERROR(AllocPinned(sample_staging, int64_t{max_seqs} * 20, "sampling inputs"));
  const std::vector<float> freqs = ModelRopeInvFreq(config);
  SERVELAB_RETURN_IF_ERROR(Alloc(inv_freq, static_cast<int64_t>(freqs.size()), "inv_freq"));
  SERVELAB_CUDA_RETURN(
      cudaMemcpy(inv_freq, freqs.data(), freqs.size() * sizeof(float), cudaMemcpyHostToDevice),
      "uploading inv_freq");
  // Split-KV scratch for any decode of up to max_seqs sequences and max_model_len tokens,
  // graph buckets included (they pass a bucket <= max_model_len as the longest context; the
  // size covers every context up to it). The shape matters through kv heads and head_dim.
  kernels::KvCacheShape shape{1, capacity.block_size, s.num_key_value_heads, s.HeadDim()};
  decode_workspace_bytes = kcuda::PagedDecodeAttentionWorkspaceBytes(
      max_seqs, s.num_attention_heads, max_model_len, shape);
  SERVELAB_RETURN_IF_ERROR(Alloc(decode_workspace,
                                 static_cast<int64_t>(decode_workspace_bytes / sizeof(float)) + 1,
                                 "the split-KV workspace"));
  meta_bytes = MetaLayout(max_tokens, max_seqs, max_stride, max_seqs).bytes;
  SERVELAB_RETURN_IF_ERROR(Alloc(meta, static_cast<int64_t>(meta_bytes), "step metadata"));
  SERVELAB_RETURN_IF_ERROR(AllocPinned(staging, static_cast<int64_t>(meta_bytes), "step metadata"));
  return Status::Ok();
}

Status CudaModelRunner::Impl::AllocateKvPools() {
  const ModelSpec& s = spec();
  const auto layer_count = static_cast<int64_t>(s.num_hidden_layers);
  block_elems = int64_t{capacity.block_size} * s.KvDim();
  capacity.bytes_per_block = s.KvBytesPerBlock(capacity.block_size, sizeof(bf16));
  int64_t blocks = options.num_blocks;
  if (blocks <= 0) {
    size_t free = 0, total = 0;
    SERVELAB_CUDA_RETURN(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    // With graphs, head-room for what capturing them allocates afterwards (graph execs,
    // kernels loaded lazily by the warm-up passes).
    const double graph_reserve = options.cuda_graphs ? double{kGraphReserveBytes} : 0.0;
    const double budget = static_cast<double>(total) * options.memory_utilization -
                          static_cast<double>(total - free) - graph_reserve;
    blocks = budget > 0
                 ? static_cast<int64_t>(budget / static_cast<double>(capacity.bytes_per_block))
                 : 0;
    if (blocks < 1) {
      return Internal("cuda runner: no room for a KV block: " + std::to_string(total >> 20) +
                      " MiB x memory_utilization " + std::to_string(options.memory_utilization) +
                      " is less than the " + std::to_string((total - free) >> 20) +
                      " MiB already in use (weights " + std::to_string(weight_bytes >> 20) +
                      " MiB, activations and workspaces)");
    }
    blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  }
  capacity.num_gpu_blocks = static_cast<int32_t>(blocks);
  bf16* pool = nullptr;
  const int64_t pool_elems = 2 * layer_count * blocks * block_elems;
  SERVELAB_RETURN_IF_ERROR(Alloc(pool, pool_elems, "the KV cache"));
  // Zeros, not whatever the allocation held: graph padding rows read block 0.
  SERVELAB_CUDA_RETURN(
      cudaMemsetAsync(pool, 0, static_cast<size_t>(pool_elems) * sizeof(bf16), stream),
      "clearing the KV cache");
  for (int64_t l = 0; l < layer_count; ++l) {
    k_cache.push_back(pool + (2 * l) * blocks * block_elems);
    v_cache.push_back(pool + (2 * l + 1) * blocks * block_elems);
  }
  const int64_t host_blocks = options.swap_space_bytes / capacity.bytes_per_block;
  capacity.num_cpu_blocks = static_cast<int32_t>(std::min<int64_t>(host_blocks, 1 << 30));
  if (capacity.num_cpu_blocks > 0) {
    SERVELAB_RETURN_IF_ERROR(AllocPinned(
        host_pool, 2 * layer_count * capacity.num_cpu_blocks * block_elems, "the swap space"));
  }
  // Weight uploads (synchronous copies on the legacy stream) and the fills above on
  // `stream`: all done before the first step, whose stream does not wait for the former.
  SERVELAB_CUDA_RETURN(cudaDeviceSynchronize(), "finishing the runner's set-up");
  return Status::Ok();
}

// y [rows, out] = x [rows, in] * W^T, W [out, in] row-major: in cuBLAS's column-major terms
// y^T = W * x^T, i.e. C (out x rows) = op(A)=A^T (A: in x out) * B (in x rows), "TN".
void CudaModelRunner::Impl::Gemm(const bf16* x, int32_t rows, const bf16* w, int32_t out,
                                 int32_t in, void* y, cudaDataType_t y_type) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF, in, x,
                   CUDA_R_16BF, in, &beta, y, y_type, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS && forward_error.ok()) {
    forward_error =
        Internal(std::string("cuda runner: cublasGemmEx ") + std::to_string(rows) + "x" +
                 std::to_string(out) + "x" + std::to_string(in) + ": " + cublasGetStatusName(s));
  }
}

void CudaModelRunner::Impl::Forward(const ForwardShape& f) {
  const ModelSpec& s = spec();
  const int32_t T = f.tokens, h = s.hidden_size, heads = s.num_attention_heads;
  const int32_t head_dim = s.HeadDim();
  const auto qd = static_cast<int32_t>(s.QDim()), kvd = static_cast<int32_t>(s.KvDim());
  const int32_t inter = s.intermediate_size;
  const auto eps = static_cast<float>(s.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::KvCacheShape shape = CacheShape();

  kcuda::EmbeddingGather(residual, embed, f.token_ids, T, s.vocab_size, h, stream);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerPointers& w = layers[i];
    if (i == 0) {
      kcuda::RmsNorm(hidden, residual, w.input_norm, T, h, eps, stream);
    } else {
      kcuda::FusedAddRmsNorm(hidden, residual, w.input_norm, T, h, eps, stream);
    }
    Gemm(hidden, T, w.qkv_proj, qd + 2 * kvd, h, qkv, CUDA_R_16BF);
    if (w.qkv_bias != nullptr) engine_cuda::AddBias(qkv, w.qkv_bias, T, qd + 2 * kvd, stream);
    engine_cuda::QkvRopeKvWrite(q, k_cache[i], v_cache[i], qkv, f.positions, inv_freq,
                                f.slot_mapping, T, heads, shape, stream);
    if (f.decode_attention) {
      kcuda::PagedDecodeAttention(attn, q, k_cache[i], v_cache[i], f.block_tables, f.context_lens,
                                  f.seqs, heads, f.block_table_stride, f.max_context_len, scale,
                                  shape, decode_workspace, decode_workspace_bytes, stream);
    } else {
      kcuda::PagedPrefillAttention(attn, q, k_cache[i], v_cache[i], f.block_tables,
                                   f.query_start_loc, f.context_lens, f.seqs, T, heads,
                                   f.block_table_stride, f.max_query_len, f.max_context_len, scale,
                                   shape, stream);
    }
    Gemm(attn, T, w.o_proj, h, qd, hidden, CUDA_R_16BF);
    if (w.o_bias != nullptr) engine_cuda::AddBias(hidden, w.o_bias, T, h, stream);
    kcuda::FusedAddRmsNorm(hidden, residual, w.post_attention_norm, T, h, eps, stream);
    Gemm(hidden, T, w.gate_up_proj, 2 * inter, h, gate_up, CUDA_R_16BF);
    kcuda::SiluAndMul(act, gate_up, T, inter, stream);
    Gemm(act, T, w.down_proj, h, inter, hidden, CUDA_R_16BF);
  }
  if (f.emitting == 0) return;
  bf16* x = hidden;
  bf16* res = residual;
  if (!f.emit_all_rows) {
    engine_cuda::GatherRows(last_hidden, hidden, f.emit_rows, f.emitting, h, stream);
    engine_cuda::GatherRows(last_residual, residual, f.emit_rows, f.emitting, h, stream);
    x = last_hidden;
    res = last_residual;
  }
  kcuda::FusedAddRmsNorm(x, res, final_norm, f.emitting, h, eps, stream);
  Gemm(x, f.emitting, lm_head, s.vocab_size, h, logits, CUDA_R_32F);
  if (f.sample_greedy) kcuda::GreedySample(sampled, logits, f.emitting, s.vocab_size, stream);
}

namespace {

// Decode graphs: batch sizes 1, 2, 4, 8, then multiples of 8.
int32_t PaddedBatch(int32_t seqs) {
  if (seqs <= 1) return 1;
  if (seqs <= 2) return 2;
  if (seqs <= 4) return 4;
  return static_cast<int32_t>(RoundUp(seqs, 8));
}

int32_t ContextBucket(int32_t context, int32_t max_model_len) {
  int32_t bucket = 512;
  while (bucket < context && bucket < max_model_len) bucket *= 2;
  return std::min(bucket, max_model_len);
}

template <typename T>
void Put(unsigned char* base, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(base + offset, values.data(), values.size() * sizeof(T));
}

}  // namespace

Status CudaModelRunner::Impl::Finish(const std::string& what) {
  const cudaError_t err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return CudaError(err, what);
  if (!forward_error.ok()) return std::exchange(forward_error, Status::Ok());
  return Status::Ok();
}

Status CudaModelRunner::Impl::SampleTopP(int32_t rows, const SamplingParams& params,
                                         std::span<const double> uniforms) {
  SERVELAB_CHECK(static_cast<int32_t>(uniforms.size()) == rows && rows <= max_seqs);
  if (rows == 0) return Status::Ok();
  const size_t n = static_cast<size_t>(max_seqs);
  auto* u = reinterpret_cast<double*>(sample_staging);
  auto* temperature = reinterpret_cast<float*>(sample_staging + 8 * n);
  auto* top_p = reinterpret_cast<float*>(sample_staging + 12 * n);
  auto* top_k = reinterpret_cast<int32_t*>(sample_staging + 16 * n);
  for (int32_t i = 0; i < rows; ++i) {
    u[i] = uniforms[static_cast<size_t>(i)];
    temperature[i] = params.temperature;
    top_p[i] = params.top_p;
    top_k[i] = params.top_k;
  }
  SERVELAB_CUDA_RETURN(
      cudaMemcpyAsync(sample_inputs, sample_staging, 20 * n, cudaMemcpyHostToDevice, stream),
      "uploading sampling inputs");
  kcuda::TopPSample(sampled, logits, reinterpret_cast<const float*>(sample_inputs + 8 * n),
                    reinterpret_cast<const int32_t*>(sample_inputs + 16 * n),
                    reinterpret_cast<const float*>(sample_inputs + 12 * n),
                    reinterpret_cast<const double*>(sample_inputs), rows, spec().vocab_size,
                    stream);
  return Status::Ok();
}

Status CudaModelRunner::Impl::Stage(int32_t rows, int32_t seqs, int32_t stride, ForwardShape& f) {
  const MetaLayout layout(rows, seqs, stride, pack.NumEmitting());
  Put(staging, layout.token_ids, pack.token_ids);
  Put(staging, layout.positions, pack.positions);
  Put(staging, layout.slot_mapping, pack.slot_mapping);
  Put(staging, layout.query_start_loc, pack.query_start_loc);
  Put(staging, layout.context_lens, pack.context_lens);
  Put(staging, layout.emit_rows, pack.emit_rows);
  // Block tables at `stride` entries per seq (the pack's are max_blocks apart); rows past
  // the pack's seqs (graph padding) point at block 0.
  auto* tables = reinterpret_cast<int32_t*>(staging + layout.block_tables);
  std::fill_n(tables, static_cast<size_t>(seqs) * static_cast<size_t>(stride), 0);
  for (int32_t r = 0; r < pack.num_seqs; ++r) {
    std::copy_n(
        pack.block_tables.begin() + static_cast<std::ptrdiff_t>(r) * pack.block_table_stride,
        pack.max_blocks, tables + static_cast<std::ptrdiff_t>(r) * stride);
  }
  SERVELAB_CUDA_RETURN(cudaMemcpyAsync(meta, staging, layout.bytes, cudaMemcpyHostToDevice, stream),
                       "uploading the step");
  f.tokens = rows;
  f.seqs = seqs;
  f.emitting = pack.NumEmitting();
  f.max_query_len = pack.max_query_len;
  f.max_context_len = pack.max_context_len;
  f.block_table_stride = stride;
  f.decode_attention = pack.AllSingleToken();
  f.token_ids = reinterpret_cast<const int32_t*>(meta + layout.token_ids);
  f.positions = reinterpret_cast<const int32_t*>(meta + layout.positions);
  f.slot_mapping = reinterpret_cast<const int64_t*>(meta + layout.slot_mapping);
  f.query_start_loc = reinterpret_cast<const int32_t*>(meta + layout.query_start_loc);
  f.context_lens = reinterpret_cast<const int32_t*>(meta + layout.context_lens);
  f.block_tables = reinterpret_cast<const int32_t*>(meta + layout.block_tables);
  f.emit_rows = reinterpret_cast<const int32_t*>(meta + layout.emit_rows);
  return Status::Ok();
}

Status CudaModelRunner::Impl::Capture(const ForwardShape& f, cudaGraphExec_t* exec) {
  // One eager pass first: lazily loaded kernels and cuBLAS's heuristics settle outside the
  // capture (it recomputes this step's KV, writing the same values again).
  Forward(f);
  SERVELAB_RETURN_IF_ERROR(std::exchange(forward_error, Status::Ok()));
  cudaGraph_t graph = nullptr;
  SERVELAB_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                       "beginning a graph capture");
  Forward(f);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (end != cudaSuccess) return CudaError(end, "capturing the decode graph");
  if (!forward_error.ok()) {
    cudaGraphDestroy(graph);
    return std::exchange(forward_error, Status::Ok());
  }
  const cudaError_t inst = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) return CudaError(inst, "instantiating the decode graph");
  return Status::Ok();
}

Status CudaModelRunner::Impl::StageDecodeGraph(int32_t B, int32_t bucket, ForwardShape& f) {
  // Padding rows (the pack's seqs are rows 0..S-1) read block 0 at context 1, write no KV
  // (slot -1), and their logits are ignored.
  const int32_t S = pack.num_seqs;
  const int32_t stride = (bucket + capacity.block_size - 1) / capacity.block_size;
  pack.token_ids.resize(static_cast<size_t>(B), 0);
  pack.positions.resize(static_cast<size_t>(B), 0);
  pack.slot_mapping.resize(static_cast<size_t>(B), -1);
  for (int32_t i = S + 1; i <= B; ++i) pack.query_start_loc.push_back(i);
  pack.context_lens.resize(static_cast<size_t>(B), 1);
  SERVELAB_RETURN_IF_ERROR(Stage(B, B, stride, f));
  f.emitting = B;
  f.max_query_len = 1;
  f.max_context_len = bucket;  // baked into the graph: the decode kernel's partition count
  f.decode_attention = true;
  f.emit_all_rows = true;
  f.sample_greedy = true;  // cheap; read only when the caller samples greedily
  return Status::Ok();
}

Status CudaModelRunner::Impl::DecodeGraph(const ForwardShape& f, cudaGraphExec_t* exec) {
  const std::pair<int32_t, int32_t> key{f.seqs, f.max_context_len};
  auto it = graphs.find(key);
  if (it == graphs.end()) {
    cudaGraphExec_t made = nullptr;
    SERVELAB_RETURN_IF_ERROR(Capture(f, &made));
    it = graphs.emplace(key, made).first;
  }
  *exec = it->second;
  return Status::Ok();
}

Status CudaModelRunner::Impl::CaptureDecodeGraphs() {
  // Every (padded batch, context bucket) a pure-decode step can take, as vLLM captures at
  // start-up: a step never pays for a capture (milliseconds) in a timed run.
  std::vector<int32_t> batches;
  for (int32_t b = 1; b <= max_seqs; b = PaddedBatch(b + 1)) batches.push_back(b);
  if (batches.back() != max_seqs) batches.push_back(max_seqs);
  std::vector<int32_t> buckets;
  for (int32_t c = 1;; c = buckets.back() + 1) {
    buckets.push_back(ContextBucket(c, max_model_len));
    if (buckets.back() >= max_model_len) break;
  }
  const StepPlan empty;
  const TokenStore no_tokens;
  for (const int32_t B : batches) {
    for (const int32_t bucket : buckets) {
      pack.Build(empty, no_tokens, capacity.block_size);
      ForwardShape f;
      SERVELAB_RETURN_IF_ERROR(StageDecodeGraph(B, bucket, f));
      cudaGraphExec_t exec = nullptr;
      SERVELAB_RETURN_IF_ERROR(DecodeGraph(f, &exec));
      // The staging buffer is rewritten for the next graph: let this upload land first.
      SERVELAB_CUDA_RETURN(cudaStreamSynchronize(stream), "capturing decode graphs");
    }
  }
  return Status::Ok();
}

Status CudaModelRunner::Impl::RunStep(const StepPlan& plan, const TokenStore& tokens,
                                      const SamplingParams* sample,
                                      std::span<const double> uniforms) {
  forward_error = Status::Ok();
  Status status = RunStepUnsynced(plan, tokens, sample, uniforms);
  if (!status.ok()) {
    // Leave nothing in flight (the pinned staging is reused) and clear a non-sticky error
    // so the next launch check does not see it.
    cudaStreamSynchronize(stream);
    cudaGetLastError();
  }
  return status;
}

Status CudaModelRunner::Impl::RunStepUnsynced(const StepPlan& plan, const TokenStore& tokens,
                                              const SamplingParams* sample,
                                              std::span<const double> uniforms) {
  SERVELAB_CUDA_RETURN(cudaSetDevice(options.device), "cudaSetDevice");
  if (!pending.ok()) return std::exchange(pending, Status::Ok());
  const bool greedy = sample != nullptr && sample->temperature <= 0.0f;
  const bool top_p = sample != nullptr && !greedy;
  if (top_p && !(sample->top_p > 0.0f && sample->top_p <= 1.0f && sample->top_k >= 0)) {
    return InvalidArgument("cuda runner: sampling needs top_p in (0, 1] and top_k >= 0");
  }
  last_step_used_graph = false;
  pack.Build(plan, tokens, capacity.block_size);
  const int32_t T = pack.NumTokens(), S = pack.num_seqs, E = pack.NumEmitting();
  SERVELAB_RETURN_IF_ERROR(CheckSlidingWindow(config, pack, "cuda runner"));
  if (T > max_tokens || S > max_seqs || pack.max_context_len > max_model_len) {
    return Internal("cuda runner: a step of " + std::to_string(T) + " tokens, " +
                    std::to_string(S) + " seqs, context " + std::to_string(pack.max_context_len) +
                    " exceeds the runner's sizes (" + std::to_string(max_tokens) + " tokens, " +
                    std::to_string(max_seqs) + " seqs, max_model_len " +
                    std::to_string(max_model_len) + ")");
  }
  if (T == 0) return Status::Ok();
  ForwardShape f;
  if (pack.AllSingleToken() && E == S && options.cuda_graphs) {
    // Pure decode: replay the graph of its padded batch and context bucket.
    const int32_t B = std::min(PaddedBatch(S), max_seqs);
    const int32_t bucket = ContextBucket(pack.max_context_len, max_model_len);
    SERVELAB_RETURN_IF_ERROR(StageDecodeGraph(B, bucket, f));
    cudaGraphExec_t exec = nullptr;
    SERVELAB_RETURN_IF_ERROR(DecodeGraph(f, &exec));
    SERVELAB_CUDA_RETURN(cudaGraphLaunch(exec, stream), "launching the decode graph");
    last_step_used_graph = true;
  } else {
    SERVELAB_RETURN_IF_ERROR(Stage(T, S, pack.block_table_stride, f));
    f.sample_greedy = greedy;
    Forward(f);
  }
  if (top_p) SERVELAB_RETURN_IF_ERROR(SampleTopP(E, *sample, uniforms));
  if (sample != nullptr && E > 0) {
    SERVELAB_CUDA_RETURN(
        cudaMemcpyAsync(sampled_host, sampled, sizeof(int32_t) * E, cudaMemcpyDeviceToHost, stream),
        "downloading sampled ids");
  }
  return Status::Ok();
}

void CudaModelRunner::Impl::CopyBlocks(std::span<const BlockCopy> copies, bool to_host) {
  if (copies.empty()) return;
  auto fail = [this, to_host](cudaError_t err) {
    if (err != cudaSuccess && pending.ok()) {
      pending = CudaError(err, to_host ? "swapping blocks out" : "swapping blocks in");
    }
  };
  fail(cudaSetDevice(options.device));
  const size_t block_bytes = static_cast<size_t>(block_elems) * sizeof(bf16);
  const int32_t src_blocks = to_host ? capacity.num_gpu_blocks : capacity.num_cpu_blocks;
  const int32_t dst_blocks = to_host ? capacity.num_cpu_blocks : capacity.num_gpu_blocks;
  const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  // Each pool is 2 x layers arrays (K, V of layer 0, K, V of layer 1, ...) of its block
  // count, back to back (AllocateKvPools): a run of consecutive blocks moves for every
  // layer in one 2D copy whose rows are the arrays. Pitches past 2^31 - 1 bytes (the
  // limit of 2D copies) fall back to one copy per array.
  auto* device_base = reinterpret_cast<unsigned char*>(k_cache.front());
  SERVELAB_CHECK_MSG(host_pool != nullptr, "block copies, but the runner has no swap space");
  auto* host_base = reinterpret_cast<unsigned char*>(host_pool);
  const size_t device_pitch = static_cast<size_t>(capacity.num_gpu_blocks) * block_bytes;
  const size_t host_pitch = static_cast<size_t>(capacity.num_cpu_blocks) * block_bytes;
  const size_t src_pitch = to_host ? device_pitch : host_pitch;
  const size_t dst_pitch = to_host ? host_pitch : device_pitch;
  const size_t arrays = 2 * k_cache.size();
  const bool two_d = std::max(src_pitch, dst_pitch) <= size_t{std::numeric_limits<int32_t>::max()};
  for (size_t i = 0; i < copies.size();) {
    size_t run = 0;
    for (; i + run < copies.size(); ++run) {
      const BlockCopy& c = copies[i + run];
      SERVELAB_CHECK_MSG(c.src >= 0 && c.src < src_blocks && c.dst >= 0 && c.dst < dst_blocks,
                         "block copy " + std::to_string(c.src) + " -> " + std::to_string(c.dst));
      if (run > 0 && (c.src != copies[i].src + static_cast<int32_t>(run) ||
                      c.dst != copies[i].dst + static_cast<int32_t>(run))) {
        break;
      }
    }
    const unsigned char* src = (to_host ? device_base : host_base) + copies[i].src * block_bytes;
    unsigned char* dst = (to_host ? host_base : device_base) + copies[i].dst * block_bytes;
    const size_t width = run * block_bytes;
    if (two_d) {
      fail(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, arrays, kind, stream));
    } else {
      for (size_t a = 0; a < arrays; ++a) {
        fail(cudaMemcpyAsync(dst + a * dst_pitch, src + a * src_pitch, width, kind, stream));
      }
    }
    i += run;
  }
}

bool CudaDeviceUsable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string("no CUDA device: ") + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
}

namespace {

Status CheckArchitecture(const ModelConfig& config, const CudaRunnerOptions& o) {
  const ModelSpec& s = config.spec;
  const int32_t head_dim = s.HeadDim();
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    return InvalidArgument("cuda runner: head_dim " + std::to_string(head_dim) +
                           " is not supported by the CUDA attention kernels (64, 128 or 256)");
  }
  if (s.num_key_value_heads < 1 || s.num_attention_heads % s.num_key_value_heads != 0 ||
      s.num_attention_heads / s.num_key_value_heads > 8) {
    return InvalidArgument("cuda runner: " + std::to_string(s.num_attention_heads) +
                           " query heads over " + std::to_string(s.num_key_value_heads) +
                           " KV heads: the decode kernel serves at most 8 per KV head");
  }
  if (o.block_size < 1 || o.max_num_seqs < 1 || o.max_num_batched_tokens < 1 || o.num_blocks < 0 ||
      o.swap_space_bytes < 0 || o.max_model_len < 0 ||
      !(o.memory_utilization > 0.0 && o.memory_utilization <= 1.0)) {
    return InvalidArgument(
        "cuda runner: invalid options (block_size, max_num_seqs, "
        "max_num_batched_tokens >= 1; num_blocks, swap_space_bytes, "
        "max_model_len >= 0; memory_utilization in (0, 1])");
  }
  return Status::Ok();
}

}  // namespace

CudaModelRunner::CudaModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelRunner::~CudaModelRunner() = default;

namespace {

StatusOr<std::unique_ptr<CudaModelRunner::Impl>> NewImpl(const ModelConfig& config,
                                                         const CudaRunnerOptions& options) {
  SERVELAB_RETURN_IF_ERROR(CheckArchitecture(config, options));
  auto impl = std::make_unique<CudaModelRunner::Impl>();
  impl->config = config;
  impl->options = options;
  impl->capacity.block_size = options.block_size;
  impl->max_model_len =
      options.max_model_len > 0 ? options.max_model_len : config.spec.max_position_embeddings;
  impl->max_seqs = options.max_num_seqs;
  impl->max_tokens = std::max(options.max_num_batched_tokens, options.max_num_seqs);
  impl->max_stride = (impl->max_model_len + options.block_size - 1) / options.block_size;
  SERVELAB_RETURN_IF_ERROR(impl->Init(options.device));
  return impl;
}

}  // namespace

StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    std::shared_ptr<const ModelWeights> weights, const CudaRunnerOptions& options) {
  SERVELAB_CHECK(weights != nullptr);
  auto impl = NewImpl(weights->config, options);
  if (!impl.ok()) return impl.status();
  Impl& r = **impl;
  SERVELAB_RETURN_IF_ERROR(r.AllocateWeights(weights->config.spec.tie_word_embeddings));
  SERVELAB_RETURN_IF_ERROR(r.UploadWeights(*weights));
  SERVELAB_RETURN_IF_ERROR(r.AllocateWorkingSet());
  SERVELAB_RETURN_IF_ERROR(r.AllocateKvPools());
  if (options.cuda_graphs) SERVELAB_RETURN_IF_ERROR(r.CaptureDecodeGraphs());
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl).value()));
}

StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::CreateFromCheckpoint(
    const std::filesystem::path& dir, const CudaRunnerOptions& options) {
  StatusOr<ModelConfig> config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir);
  if (!file.ok()) return file.status();
  auto impl = NewImpl(*config, options);
  if (!impl.ok()) return impl.status();
  Impl& r = **impl;
  SERVELAB_RETURN_IF_ERROR(r.AllocateWeights(config->spec.tie_word_embeddings));
  SERVELAB_RETURN_IF_ERROR(r.UploadCheckpoint(*file));
  SERVELAB_RETURN_IF_ERROR(r.AllocateWorkingSet());
  SERVELAB_RETURN_IF_ERROR(r.AllocateKvPools());
  if (options.cuda_graphs) SERVELAB_RETURN_IF_ERROR(r.CaptureDecodeGraphs());
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl).value()));
}

StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::CreateRandom(
    const ModelConfig& config, uint64_t seed, double init_std, const CudaRunnerOptions& options) {
  auto impl = NewImpl(config, options);
  if (!impl.ok()) return impl.status();
  Impl& r = **impl;
  SERVELAB_RETURN_IF_ERROR(r.AllocateWeights(config.spec.tie_word_embeddings));
  SERVELAB_RETURN_IF_ERROR(r.RandomWeights(seed, init_std));
  SERVELAB_RETURN_IF_ERROR(r.AllocateWorkingSet());
  SERVELAB_RETURN_IF_ERROR(r.AllocateKvPools());
  if (options.cuda_graphs) SERVELAB_RETURN_IF_ERROR(r.CaptureDecodeGraphs());
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl).value()));
}

const ModelConfig& CudaModelRunner::Config() const { return impl_->config; }
KvCapacity CudaModelRunner::Capacity() const { return impl_->capacity; }
void CudaModelRunner::SwapOut(std::span<const BlockCopy> copies) {
  impl_->CopyBlocks(copies, /*to_host=*/true);
}
void CudaModelRunner::SwapIn(std::span<const BlockCopy> copies) {
  impl_->CopyBlocks(copies, /*to_host=*/false);
}

Status CudaModelRunner::Execute(const StepPlan& plan, const TokenStore& tokens,
                                std::vector<float>& logits) {
  Impl& r = *impl_;
  SERVELAB_RETURN_IF_ERROR(r.RunStep(plan, tokens, /*sample=*/nullptr, {}));
  const auto rows = static_cast<size_t>(r.pack.NumEmitting());
  const auto vocab = static_cast<size_t>(r.spec().vocab_size);
  logits.resize(rows * vocab);
  if (rows > 0) {
    SERVELAB_CUDA_RETURN(cudaMemcpyAsync(logits.data(), r.logits, rows * vocab * sizeof(float),
                                         cudaMemcpyDeviceToHost, r.stream),
                         "downloading logits");
  }
  return r.Finish("a step");
}

bool CudaModelRunner::SamplesOnDevice(const SamplingParams& /*params*/) const { return true; }

Status CudaModelRunner::ExecuteAndSample(const StepPlan& plan, const TokenStore& tokens,
                                         const SamplingParams& params,
                                         std::span<const double> uniforms,
                                         std::vector<int32_t>& token_ids) {
  Impl& r = *impl_;
  SERVELAB_RETURN_IF_ERROR(r.RunStep(plan, tokens, &params, uniforms));
  SERVELAB_RETURN_IF_ERROR(r.Finish("a step"));
  const int32_t rows = r.pack.NumEmitting();
  token_ids.assign(r.sampled_host, r.sampled_host + rows);
  return Status::Ok();
}

std::string CudaModelRunner::DeviceName() const { return impl_->device_name; }
int64_t CudaModelRunner::WeightBytes() const { return impl_->weight_bytes; }
int64_t CudaModelRunner::KvBytesPerToken() const {
  return impl_->capacity.bytes_per_block / impl_->capacity.block_size;
}
int32_t CudaModelRunner::NumCapturedGraphs() const {
  return static_cast<int32_t>(impl_->graphs.size());
}
bool CudaModelRunner::LastStepUsedGraph() const { return impl_->last_step_used_graph; }

}  // namespace servelab
