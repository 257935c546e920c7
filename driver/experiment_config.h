#pragma once
// An experiment, as a researcher writes it in YAML: plain structs, every default
// documented where it is declared. The YAML parser (driver/config_yaml.cc) is the only
// place that reads YAML; it visits these fields through VisitFields.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/fields.h"
#include "core/model_spec.h"
#include "core/scheduler_config.h"
#include "driver/gpu_spec.h"
#include "driver/key_locations.h"
#include "driver/plan_config.h"
#include "driver/workload_config.h"

namespace servelab {

inline constexpr EnumName<DType> kWeightDTypeNames[] = {
    {"fp32", DType::kFp32}, {"fp16", DType::kFp16}, {"bf16", DType::kBf16},
    {"fp8", DType::kFp8},   {"int8", DType::kInt8}, {"int4", DType::kInt4}};
inline constexpr EnumName<DType> kKvDTypeNames[] = {
    {"fp16", DType::kFp16}, {"bf16", DType::kBf16}, {"fp8", DType::kFp8}};

// The network between nodes, per GPU and direction (one NIC per GPU, as in DGX H100):
// nominal link rates (Gb/s / 8), and an assumed extra cost per collective that crosses
// nodes (NIC, switch, protocol) on top of cost_model.allreduce_latency_us.
struct NetworkSpec {
  std::string_view name;
  double bandwidth_gbps;  // GB/s
  double latency_us;
};
inline constexpr NetworkSpec kNetworks[] = {
    {"ib-ndr", 50.0, 10.0},    // InfiniBand NDR, 400 Gb/s
    {"ib-hdr", 25.0, 10.0},    // InfiniBand HDR, 200 Gb/s
    {"roce-400", 50.0, 15.0},  // RoCE v2 over 400 GbE
    {"eth-100", 12.5, 25.0},   // 100 GbE, TCP
};
enum class Network : uint8_t { kIbNdr, kIbHdr, kRoce400, kEth100 };
inline constexpr EnumName<Network> kNetworkNames[] = {{"ib-ndr", Network::kIbNdr},
                                                      {"ib-hdr", Network::kIbHdr},
                                                      {"roce-400", Network::kRoce400},
                                                      {"eth-100", Network::kEth100}};

struct HardwareConfig {
  GpuSpec gpu;                    // a catalog name (`servelab list gpus`) or a mapping
  int32_t tensor_parallel = 1;    // GPUs splitting each layer (all-reduce per layer)
  int32_t pipeline_parallel = 1;  // GPUs holding consecutive layer stages
  // Mixture of experts: 1 splits every expert's width over the tensor-parallel GPUs; N
  // (= tensor_parallel) gives each of them num_experts / N whole experts instead, with
  // an all-to-all dispatch and combine around every MoE layer (vLLM's
  // --enable-expert-parallel, SGLang's --ep-size).
  int32_t expert_parallel = 1;
  double memory_utilization = 0.9;  // fraction of device memory servelab may use (vLLM's)
  double framework_overhead_gib = 1.0;  // CUDA context, allocator slack, graphs (seed: 0.5-2)
  // KV cache blocks per replica; 0 = derived from the memory formula (`servelab memory`).
  int64_t num_gpu_blocks = 0;
  // Host memory per GPU for swapped-out KV blocks (scheduler.preemption: swap); vLLM's
  // default is 4 GiB.
  double swap_space_gib = 4.0;
  // Nodes: a replica's GPUs fill nodes of gpus_per_node in order, pipeline stage by
  // stage. A tensor-parallel (or expert-parallel) group larger than a node, and a stage
  // boundary between nodes, use the network instead of the GPU link; its figures are
  // the named network's unless network_gbps / network_latency_us (0 = the network's)
  // override them.
  int32_t gpus_per_node = 8;
  Network network = Network::kIbNdr;
  double network_gbps = 0;
  double network_latency_us = 0;

  const NetworkSpec& NetworkFigures() const { return kNetworks[static_cast<size_t>(network)]; }
  double NetworkGbps() const { return network_gbps > 0 ? network_gbps : NetworkFigures().bandwidth_gbps; }
  double NetworkLatencyUs() const {
    return network_latency_us > 0 ? network_latency_us : NetworkFigures().latency_us;
  }

  template <class V>
  void VisitFields(V& v) {
    v.Catalog("gpu", gpu);
    v.Field("tensor_parallel", tensor_parallel, Bounds{1, 64});
    v.Field("pipeline_parallel", pipeline_parallel, Bounds{1, 64});
    v.Field("expert_parallel", expert_parallel, Bounds{1, 64});
    v.Field("memory_utilization", memory_utilization, kOpenUnitInterval);
    v.Field("framework_overhead_gib", framework_overhead_gib, Bounds{0, 1e6});
    v.Field("num_gpu_blocks", num_gpu_blocks, Bounds{0, 1 << 24});  // kMaxKvBlocks
    v.Field("swap_space_gib", swap_space_gib, Bounds{0, 1e6});
    v.Field("gpus_per_node", gpus_per_node, Bounds{1, 1 << 16});
    v.Enum("network", network, EnumNames<Network>(kNetworkNames));
    v.Field("network_gbps", network_gbps, Bounds{0, 1e7});
    v.Field("network_latency_us", network_latency_us, Bounds{0, 1e6});
  }
};

struct PrecisionConfig {
  DType weights = DType::kBf16;   // fp32 | fp16 | bf16 | fp8 | int8 | int4
  DType kv_cache = DType::kBf16;  // fp16 | bf16 | fp8

  template <class V>
  void VisitFields(V& v) {
    v.Enum("weights", weights, EnumNames<DType>(kWeightDTypeNames));
    v.Enum("kv_cache", kv_cache, EnumNames<DType>(kKvDTypeNames));
  }
};

struct ClusterConfig {
  int32_t replicas = 1;  // identical replicas (data parallel), each its own scheduler
  NamedParams router{"round_robin", {}, "cluster.router", "", ""};  // round_robin | least_loaded | cache_aware

  template <class V>
  void VisitFields(V& v) {
    v.Field("replicas", replicas, Bounds{1, 4096});
    v.Named("router", router);
  }
};

// Latency targets; 0 = no target on that metric. A request meets the SLO when it meets
// every set target (goodput counts those).
struct SloConfig {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double e2e_ms = 0;

  template <class V>
  void VisitFields(V& v) {
    v.Field("ttft_ms", ttft_ms, kNonNegative);
    v.Field("tpot_ms", tpot_ms, kNonNegative);
    v.Field("e2e_ms", e2e_ms, kNonNegative);
  }
};

struct OutputConfig {
  std::string dir;                  // "" = results/<name> (relative to the working directory)
  bool steps_csv = true;            // one row per iteration
  bool trace_json = true;           // Chrome/Perfetto trace, one slice per iteration
  int64_t trace_max_steps = 200000;  // slices beyond this are dropped (keeps files openable)

  template <class V>
  void VisitFields(V& v) {
    v.Field("dir", dir);
    v.Field("steps_csv", steps_csv);
    v.Field("trace_json", trace_json);
    v.Field("trace_max_steps", trace_max_steps, kNonNegative);
  }
};

enum class BackendKind : uint8_t { kSim, kEngine };
inline constexpr EnumName<BackendKind> kBackendNames[] = {{"sim", BackendKind::kSim},
                                                          {"engine", BackendKind::kEngine}};
enum class EngineDevice : uint8_t { kCpu, kCuda };
inline constexpr EnumName<EngineDevice> kEngineDeviceNames[] = {{"cpu", EngineDevice::kCpu},
                                                                {"cuda", EngineDevice::kCuda}};
enum class EngineClock : uint8_t {
  kVirtual,  // a virtual clock advanced by each step's measured time: reproducible schedule
  kWall,     // requests released at their arrival times in real time; host overhead counts
};
enum class EngineWeights : uint8_t {
  kCheckpoint,  // engine.model_path (written first when create_model is set)
  kRandom,      // cuda only: seeded random weights generated on the device for `model`
};
inline constexpr EnumName<EngineWeights> kEngineWeightsNames[] = {
    {"checkpoint", EngineWeights::kCheckpoint}, {"random", EngineWeights::kRandom}};
inline constexpr EnumName<EngineClock> kEngineClockNames[] = {{"virtual", EngineClock::kVirtual},
                                                              {"wall", EngineClock::kWall}};

struct SamplingConfig {
  double temperature = 0.0;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off

  template <class V>
  void VisitFields(V& v) {
    v.Field("temperature", temperature, kNonNegative);
    v.Field("top_k", top_k, kNonNegative);
    v.Field("top_p", top_p, kOpenUnitInterval);
  }
};

// The real engine (backend: engine). The same experiment runs on the simulator
// (backend: sim, the default): `model` then describes the engine's model, so the two
// can be compared.
struct EngineConfig {
  std::string model_path;  // a Hugging Face folder: config.json + safetensors
  // When model_path does not exist: write seeded random weights there for the
  // architecture `model` describes (like `servelab make-model`).
  bool create_model = false;
  int64_t model_seed = 0;
  EngineDevice device = EngineDevice::kCpu;
  // random: no files at all, full-size timing with no download (device: cuda only; the
  // values differ from create_model's files, though both are seeded by model_seed).
  EngineWeights weights = EngineWeights::kCheckpoint;
  EngineClock clock = EngineClock::kVirtual;
  double kv_cache_gib = 0.25;  // cpu: memory for the paged KV pool (f32). cuda: the pool
                               // fills hardware.memory_utilization of device memory
  bool cuda_graphs = true;     // cuda: replay captured graphs for pure-decode steps
  // Before serving, run the widest steps the scheduler can form once, untimed
  // (EngineBackend::WarmUp), as vLLM's profile run does: false leaves the first steps
  // served to pay for the host's first touches.
  bool warmup = true;
  bool ignore_eos = true;      // generate exactly each request's target output length
  SamplingConfig sampling;

  template <class V>
  void VisitFields(V& v) {
    v.Path("model_path", model_path);
    v.Field("create_model", create_model);
    v.Field("model_seed", model_seed, kNonNegative);
    v.Enum("device", device, EnumNames<EngineDevice>(kEngineDeviceNames));
    v.Enum("weights", weights, EnumNames<EngineWeights>(kEngineWeightsNames));
    v.Enum("clock", clock, EnumNames<EngineClock>(kEngineClockNames));
    v.Field("kv_cache_gib", kv_cache_gib, Bounds{0, 1e6, true, false});
    v.Field("cuda_graphs", cuda_graphs);
    v.Field("warmup", warmup);
    v.Field("ignore_eos", ignore_eos);
    v.Section("sampling", sampling);
  }
};

struct ExperimentConfig {
  std::string name = "experiment";
  int64_t seed = 1;  // every random stream derives from it
  // Independent repetitions of the experiment, replicate r with seed ReplicateSeed(seed,
  // r) (replicate 0 keeps `seed`): sweep, compare and plan report each metric's mean
  // over them with its 95% confidence interval.
  int32_t replicates = 1;
  ModelSpec model;   // a catalog name (`servelab list models`) or a mapping (config.json keys)
  HardwareConfig hardware;
  PrecisionConfig precision;
  ClusterConfig cluster;
  SchedulerConfig scheduler;
  // The simulator's cost model: "roofline" or {type: <name>, <its parameters>}
  // (`servelab list cost-models`); its registry (sim/cost_model.h) knows the parameters.
  // A mapping without `type` is the roofline's (--set cost_model.gemm_efficiency=0.6).
  NamedParams cost_model{"roofline", {}, "cost_model", "", ""};
  WorkloadConfig workload;
  SloConfig slo;
  OutputConfig output;
  BackendKind backend = BackendKind::kSim;
  bool has_engine = false;
  EngineConfig engine;  // required when backend: engine
  bool has_plan = false;
  PlanConfig plan;      // read by `servelab plan` only

  std::string source_path;  // the YAML file this came from (not a key)
  KeyLocations locations;   // where each given key is in it, for later checks' messages

  // "exp.yaml:12: scheduler.max_model_len" (KeyLocations::Label).
  std::string Where(std::string_view key_path) const { return locations.Label(key_path); }
  // `status` with the location of the key its message starts with, when it starts with
  // one of this struct's keys (KeyLocations::Locate); defined in driver/experiment.cc.
  Status Locate(const Status& status) const;

  template <class V>
  void VisitFields(V& v) {
    v.Field("name", name);
    v.Field("seed", seed, kNonNegative);
    v.Field("replicates", replicates, Bounds{1, 1000});
    v.Catalog("model", model);
    v.Section("hardware", hardware);
    v.Section("precision", precision);
    v.Section("cluster", cluster);
    v.Section("scheduler", scheduler);
    v.Named("cost_model", cost_model, "type", /*name_required=*/false);
    v.Section("workload", workload);
    v.Section("slo", slo);
    v.Section("output", output);
    v.Enum("backend", backend, EnumNames<BackendKind>(kBackendNames));
    v.OptionalSection("engine", engine, has_engine);
    v.OptionalSection("plan", plan, has_plan);
  }
};

}  // namespace servelab
