// The CUDA runner: its parts, each owning its state (engine/cuda/):
//   DeviceContext  device, stream, cuBLAS
//   DeviceWeights  bf16 weights (checkpoint, loaded weights or seeded random)
//   DeviceKvPool   the paged KV cache and the pinned swap pool, block copies
//   DeviceStep     activations, the packed step's upload, the forward pass, sampling
//   DecodeGraphs   captured pure-decode graphs by (batch, context bucket)
// and here, how a step uses them.
#include "engine/cuda/cuda_model_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_context.h"
#include "engine/cuda/device_kv_pool.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_step.h"
#include "engine/cuda/device_weights.h"
#include "engine/safetensors.h"
#include "engine/step_pack.h"
#include "kernels/decode_graph_shape.h"

namespace servelab {

using engine_cuda::CudaError;
using engine_cuda::DecodeGraphs;
using engine_cuda::ForwardShape;

namespace {

constexpr int64_t kGraphReserveBytes = int64_t{256} << 20;

Status CheckArchitecture(const ModelConfig& config, const CudaRunnerOptions& o) {
  const ModelSpec& s = config.spec;
  if (s.IsMoe()) {
    return InvalidArgument("cuda runner: " + s.name + " is a mixture of experts (" +
                           std::string(ModelTypeName(config.family)) + "); the CUDA runner has "
                           "no expert kernels yet, so run it on device: cpu");
  }
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

struct CudaModelRunner::Impl {
  Impl(const ModelConfig& model, const CudaRunnerOptions& runner_options)
      : config(model), options(runner_options), step(config, context, weights, kv) {
    sizes.block_size = options.block_size;
    sizes.max_model_len =
        options.max_model_len > 0 ? options.max_model_len : config.spec.max_position_embeddings;
    sizes.max_seqs = options.max_num_seqs;
    sizes.max_tokens = std::max(options.max_num_batched_tokens, options.max_num_seqs);
    sizes.max_stride = (sizes.max_model_len + options.block_size - 1) / options.block_size;
  }

  // Weights are in place: the working set, then the KV pool from what memory is left,
  // then (with graphs) every decode graph.
  Status Finish();
  Status CaptureDecodeGraphs();
  // sample: nullptr = logits only; else greedy (temperature <= 0) or TopPSample with
  // `uniforms` as the draws, token ids into the step's pinned buffer.
  Status RunStep(const StepPlan& plan, const TokenStore& tokens, const SamplingParams* sample,
                 std::span<const double> uniforms);
  Status RunStepUnsynced(const StepPlan& plan, const TokenStore& tokens,
                         const SamplingParams* sample, std::span<const double> uniforms);
  // Waits for the stream; the first error of the step (CUDA, then cuBLAS).
  Status Sync(const std::string& what);
  Status ForwardNow(const ForwardShape& f) {
    step.Forward(f);
    return step.TakeError();
  }

  ModelConfig config;
  CudaRunnerOptions options;
  engine_cuda::StepSizes sizes;
  // Declaration order is destruction order reversed: graphs go first, the stream last.
  engine_cuda::DeviceContext context;
  engine_cuda::DeviceWeights weights;
  engine_cuda::DeviceKvPool kv;
  engine_cuda::DeviceStep step;
  DecodeGraphs graphs;
  StepPack pack;
  std::optional<DecodeGraphRun> last_graph;  // the last step's, when it replayed one
  OpTimer* timer = nullptr;  // profiling: eager steps, op events
  engine_cuda::OpEvents events;
  bool events_ready = false;
};

Status CudaModelRunner::Impl::Finish() {
  SERVELAB_RETURN_IF_ERROR(step.Allocate(sizes));
  engine_cuda::KvPoolOptions pool;
  pool.block_size = options.block_size;
  pool.num_blocks = options.num_blocks;
  pool.memory_utilization = options.memory_utilization;
  // With graphs, head-room for what capturing them allocates afterwards (graph execs,
  // kernels loaded lazily by the warm-up passes).
  pool.reserve_bytes = options.cuda_graphs ? kGraphReserveBytes : 0;
  pool.swap_space_bytes = options.swap_space_bytes;
  SERVELAB_RETURN_IF_ERROR(kv.Allocate(
      config.spec, pool,
      "weights " + std::to_string(weights.Bytes() >> 20) + " MiB, activations and workspaces",
      context.Stream()));
  // Weight uploads (synchronous copies on the legacy stream) and the fills above on the
  // stream: all done before the first step, whose stream does not wait for the former.
  SERVELAB_CUDA_RETURN(cudaDeviceSynchronize(), "finishing the runner's set-up");
  if (options.cuda_graphs) SERVELAB_RETURN_IF_ERROR(CaptureDecodeGraphs());
  return Status::Ok();
}

Status CudaModelRunner::Impl::CaptureDecodeGraphs() {
  // Every (padded batch, context bucket) a pure-decode step can take.
  std::vector<int32_t> batches;
  for (int32_t b = 1; b <= sizes.max_seqs; b = kernels::DecodeGraphBatch(b + 1, 0)) {
    batches.push_back(b);
  }
  if (batches.back() != sizes.max_seqs) batches.push_back(sizes.max_seqs);
  std::vector<int32_t> buckets;
  for (int32_t c = 1;; c = buckets.back() + 1) {
    buckets.push_back(kernels::DecodeGraphContextBucket(c, sizes.max_model_len));
    if (buckets.back() >= sizes.max_model_len) break;
  }
  const StepPlan empty;
  const TokenStore no_tokens;
  const auto forward = [this](const ForwardShape& f) { return ForwardNow(f); };
  for (const int32_t B : batches) {
    for (const int32_t bucket : buckets) {
      pack.Build(empty, no_tokens, options.block_size);
      ForwardShape f;
      SERVELAB_RETURN_IF_ERROR(step.StageDecodeGraph(pack, B, bucket, f));
      cudaGraphExec_t exec = nullptr;
      SERVELAB_RETURN_IF_ERROR(graphs.Get(f, context.Stream(), forward, &exec));
      // The staging buffer is rewritten for the next graph: let this upload land first.
      SERVELAB_CUDA_RETURN(cudaStreamSynchronize(context.Stream()), "capturing decode graphs");
    }
  }
  return Status::Ok();
}

Status CudaModelRunner::Impl::Sync(const std::string& what) {
  const cudaError_t err = cudaStreamSynchronize(context.Stream());
  if (err != cudaSuccess) return CudaError(err, what);
  SERVELAB_RETURN_IF_ERROR(step.TakeError());
  if (timer == nullptr) return Status::Ok();
  return events.Report([this](Op op, double seconds) { timer->Record(op, seconds); });
}

Status CudaModelRunner::Impl::RunStep(const StepPlan& plan, const TokenStore& tokens,
                                      const SamplingParams* sample,
                                      std::span<const double> uniforms) {
  (void)step.TakeError();
  last_graph.reset();  // every path, failures included: no earlier step's graph is reported
  Status status = RunStepUnsynced(plan, tokens, sample, uniforms);
  if (!status.ok()) {
    last_graph.reset();
    // Leave nothing in flight (the pinned staging is reused) and clear a non-sticky error
    // so the next launch check does not see it.
    cudaStreamSynchronize(context.Stream());
    cudaGetLastError();
  }
  return status;
}

Status CudaModelRunner::Impl::RunStepUnsynced(const StepPlan& plan, const TokenStore& tokens,
                                              const SamplingParams* sample,
                                              std::span<const double> uniforms) {
  SERVELAB_CUDA_RETURN(cudaSetDevice(options.device), "cudaSetDevice");
  SERVELAB_RETURN_IF_ERROR(kv.TakeError());  // a swap copy failure of this step
  const bool greedy = sample != nullptr && sample->temperature <= 0.0f;
  const bool top_p = sample != nullptr && !greedy;
  if (top_p && !(sample->top_p > 0.0f && sample->top_p <= 1.0f && sample->top_k >= 0)) {
    return InvalidArgument("cuda runner: sampling needs top_p in (0, 1] and top_k >= 0");
  }
  pack.Build(plan, tokens, options.block_size);
  const int32_t T = pack.NumTokens(), S = pack.num_seqs, E = pack.NumEmitting();
  SERVELAB_RETURN_IF_ERROR(CheckSlidingWindow(config, pack, "cuda runner"));
  if (T > sizes.max_tokens || S > sizes.max_seqs || pack.max_context_len > sizes.max_model_len) {
    return Internal("cuda runner: a step of " + std::to_string(T) + " tokens, " +
                    std::to_string(S) + " seqs, context " + std::to_string(pack.max_context_len) +
                    " exceeds the runner's sizes (" + std::to_string(sizes.max_tokens) +
                    " tokens, " + std::to_string(sizes.max_seqs) + " seqs, max_model_len " +
                    std::to_string(sizes.max_model_len) + ")");
  }
  if (T == 0) return Status::Ok();
  const cudaStream_t stream = context.Stream();
  ForwardShape f;
  if (pack.AllSingleToken() && E == S && options.cuda_graphs && timer == nullptr) {
    // Pure decode: replay the graph of its padded batch and context bucket.
    const int32_t B = kernels::DecodeGraphBatch(S, sizes.max_seqs);
    const int32_t bucket = kernels::DecodeGraphContextBucket(pack.max_context_len, sizes.max_model_len);
    SERVELAB_RETURN_IF_ERROR(step.StageDecodeGraph(pack, B, bucket, f));
    cudaGraphExec_t exec = nullptr;
    SERVELAB_RETURN_IF_ERROR(graphs.Get(
        f, stream, [this](const ForwardShape& g) { return ForwardNow(g); }, &exec));
    SERVELAB_CUDA_RETURN(cudaGraphLaunch(exec, stream), "launching the decode graph");
    last_graph = DecodeGraphRun{B, bucket};
  } else {
    SERVELAB_RETURN_IF_ERROR(step.Stage(pack, T, S, pack.block_table_stride, f));
    f.sample_greedy = greedy;
    step.Forward(f, timer != nullptr ? &events : nullptr);
  }
  if (top_p) SERVELAB_RETURN_IF_ERROR(step.SampleTopP(E, *sample, uniforms));
  if (sample != nullptr && E > 0) {
    SERVELAB_CUDA_RETURN(cudaMemcpyAsync(step.SampledHost(), step.Sampled(), sizeof(int32_t) * E,
                                         cudaMemcpyDeviceToHost, stream),
                         "downloading sampled ids");
  }
  return Status::Ok();
}

bool CudaDeviceUsable(std::string* why) { return engine_cuda::DeviceUsable(why); }

CudaModelRunner::CudaModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelRunner::~CudaModelRunner() = default;

namespace {

StatusOr<std::unique_ptr<CudaModelRunner::Impl>> NewImpl(const ModelConfig& config,
                                                         const CudaRunnerOptions& options) {
  SERVELAB_RETURN_IF_ERROR(CheckArchitecture(config, options));
  auto impl = std::make_unique<CudaModelRunner::Impl>(config, options);
  SERVELAB_RETURN_IF_ERROR(impl->context.Init(options.device));
  SERVELAB_RETURN_IF_ERROR(impl->weights.Allocate(config));
  return impl;
}

}  // namespace

StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    std::shared_ptr<const ModelWeights> weights, const CudaRunnerOptions& options) {
  SERVELAB_CHECK(weights != nullptr);
  auto impl = NewImpl(weights->config, options);
  if (!impl.ok()) return impl.status();
  SERVELAB_RETURN_IF_ERROR((*impl)->weights.Upload(*weights));
  SERVELAB_RETURN_IF_ERROR((*impl)->Finish());
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
  SERVELAB_RETURN_IF_ERROR((*impl)->weights.UploadCheckpoint(*file));
  SERVELAB_RETURN_IF_ERROR((*impl)->Finish());
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl).value()));
}

StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::CreateRandom(
    const ModelConfig& config, uint64_t seed, double init_std, const CudaRunnerOptions& options) {
  auto impl = NewImpl(config, options);
  if (!impl.ok()) return impl.status();
  Impl& r = **impl;
  SERVELAB_RETURN_IF_ERROR(r.weights.Randomize(seed, init_std, r.context.Stream()));
  SERVELAB_RETURN_IF_ERROR(r.Finish());
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl).value()));
}

const ModelConfig& CudaModelRunner::Config() const { return impl_->config; }
KvCapacity CudaModelRunner::Capacity() const { return impl_->kv.Capacity(); }
void CudaModelRunner::SwapOut(std::span<const BlockCopy> copies) {
  impl_->kv.Copy(copies, /*to_host=*/true, impl_->options.device, impl_->context.Stream());
}
void CudaModelRunner::SwapIn(std::span<const BlockCopy> copies) {
  impl_->kv.Copy(copies, /*to_host=*/false, impl_->options.device, impl_->context.Stream());
}

void CudaModelRunner::SetOpTimer(OpTimer* timer) {
  Impl& r = *impl_;
  if (timer != nullptr && !r.events_ready) {
    // An event per op: embedding, 10 per layer, final norm, LM head, sampling.
    const Status made = r.events.Init(10 * r.config.spec.num_hidden_layers + 8);
    r.events_ready = made.ok();
    if (!made.ok()) return;  // no events: the steps stay untimed
  }
  r.timer = timer;
}

Status CudaModelRunner::Execute(const StepPlan& plan, const TokenStore& tokens,
                                std::vector<float>& logits) {
  Impl& r = *impl_;
  SERVELAB_RETURN_IF_ERROR(r.RunStep(plan, tokens, /*sample=*/nullptr, {}));
  const auto rows = static_cast<size_t>(r.pack.NumEmitting());
  const auto vocab = static_cast<size_t>(r.config.spec.vocab_size);
  logits.resize(rows * vocab);
  if (rows > 0) {
    SERVELAB_CUDA_RETURN(cudaMemcpyAsync(logits.data(), r.step.Logits(),
                                         rows * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                         r.context.Stream()),
                         "downloading logits");
  }
  return r.Sync("a step");
}

bool CudaModelRunner::SamplesOnDevice(const SamplingParams& /*params*/) const { return true; }

Status CudaModelRunner::ExecuteAndSample(const StepPlan& plan, const TokenStore& tokens,
                                         const SamplingParams& params,
                                         std::span<const double> uniforms,
                                         std::vector<int32_t>& token_ids) {
  Impl& r = *impl_;
  SERVELAB_RETURN_IF_ERROR(r.RunStep(plan, tokens, &params, uniforms));
  SERVELAB_RETURN_IF_ERROR(r.Sync("a step"));
  const int32_t rows = r.pack.NumEmitting();
  token_ids.assign(r.step.SampledHost(), r.step.SampledHost() + rows);
  return Status::Ok();
}

std::string CudaModelRunner::DeviceName() const { return impl_->context.Name(); }
int64_t CudaModelRunner::WeightBytes() const { return impl_->weights.Bytes(); }
int64_t CudaModelRunner::KvBytesPerToken() const {
  const KvCapacity& c = impl_->kv.Capacity();
  return c.bytes_per_block / c.block_size;
}
int32_t CudaModelRunner::NumCapturedGraphs() const { return impl_->graphs.Count(); }
std::optional<DecodeGraphRun> CudaModelRunner::LastDecodeGraph() const { return impl_->last_graph; }

}  // namespace servelab
