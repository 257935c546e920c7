// `servelab list` and `servelab memory`: the catalogs, registries and the memory formula.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "core/text.h"
#include "policies/registry.h"
#include "sim/cost_model.h"
#include "driver/gpu_catalog.h"
#include "core/scheduler_config.h"
#include "driver/experiment.h"
#include "sim/memory.h"
#include "driver/model_catalog.h"
#include "driver/router.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

void ListGpus() {
  std::printf("%-12s %8s %9s %9s %8s %8s %7s %6s %7s %4s\n", "name", "mem_GiB", "HBM_GB/s",
              "bf16_TF", "fp8_TF", "link_GB/s", "pcie", "TDP_W", "$/h", "SMs");
  for (const GpuSpec& g : GpuCatalog()) {
    std::printf("%-12s %8.1f %9.0f %9.1f %8.1f %8.0f %7.0f %6.0f %7.2f %4d\n", g.name.c_str(),
                g.memory_gib, g.mem_bandwidth_gbps, g.bf16_tflops, g.fp8_tflops,
                g.interconnect_gbps, g.pcie_gbps, g.power_w, g.price_per_hour, g.sm_count);
  }
  std::puts("\nTFLOPS are dense tensor-core peaks; link = GPU-GPU per direction; a custom GPU\n"
            "is a mapping under hardware.gpu with these keys (see sim/gpu_spec.h).");
}

void ListModels() {
  std::printf("%-16s %9s %9s %6s %7s %6s %4s %7s %8s %7s %9s\n", "name", "params_B", "active_B",
              "layers", "hidden", "heads", "kv", "inter", "context", "vocab", "experts");
  for (const ModelSpec& m : ModelCatalog()) {
    const std::string experts = m.IsMoe() ? std::to_string(m.num_experts_per_tok) + "/" +
                                                std::to_string(m.num_experts) + "x" +
                                                std::to_string(m.ExpertWidth())
                                          : "-";
    std::printf("%-16s %9.2f %9.2f %6d %7d %6d %4d %7d %8d %7d %9s\n", m.name.c_str(),
                static_cast<double>(m.NumParams()) * 1e-9,
                static_cast<double>(m.NumActiveParams()) * 1e-9, m.num_hidden_layers,
                m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.intermediate_size,
                m.max_position_embeddings, m.vocab_size, experts.c_str());
  }
  std::puts("\nexperts: per token / per layer x width (mixture of experts). A custom model is\n"
            "a mapping under `model` with config.json keys, optionally starting from\n"
            "`base: <catalog name>`.");
}

void ListPolicies() {
  const PolicyRegistry& registry = BuiltinPolicies();
  for (const auto& name : registry.Names()) {
    std::printf("%-14s %s\n", name.c_str(), registry.Summary(name).c_str());
  }
  std::printf("\nrouters (cluster.router):\n");
  const RouterRegistry& routers = BuiltinRouters();
  for (const auto& name : routers.Names()) {
    std::printf("%-14s %s\n", name.c_str(), routers.Summary(name).c_str());
  }
}

void ListCostModels() {
  const CostModelRegistry& registry = BuiltinCostModels();
  for (const auto& name : registry.Names()) {
    // A summary's later lines align under its first.
    std::string summary = registry.Summary(name);
    for (size_t at = summary.find('\n'); at != std::string::npos; at = summary.find('\n', at + 1)) {
      summary.insert(at + 1, 11, ' ');
    }
    std::printf("%-10s %s\n", name.c_str(), summary.c_str());
  }
}

}  // namespace

int ListCommand(const std::vector<std::string>& args) {
  const std::vector<std::string> kinds = {"gpus", "models", "policies", "cost-models"};
  if (args.size() != 1 || args[0] == "--help" || args[0] == "-h") {
    const bool help = args.size() == 1;
    std::fprintf(help ? stdout : stderr, "usage: servelab list %s\n", Join(kinds, "|").c_str());
    return help ? kExitOk : kExitBadInput;
  }
  const std::string& kind = args[0];
  if (kind == "gpus") ListGpus();
  else if (kind == "models") ListModels();
  else if (kind == "policies") ListPolicies();
  else if (kind == "cost-models") ListCostModels();
  else {
    std::fprintf(stderr, "servelab list: %s\n", UnknownNameMessage("list", kind, kinds).c_str());
    return kExitBadInput;
  }
  return kExitOk;
}

int MemoryCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab memory --model M --gpu G [options]");
  std::string model_name, gpu_name, weight_dtype = "bf16", kv_dtype = "bf16";
  MemoryOptions mem;
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>(&model_name), "catalog model (servelab list models)")
      ("gpu", po::value<std::string>(&gpu_name), "catalog GPU (servelab list gpus)")
      ("tp", po::value<int32_t>(&mem.tensor_parallel)->default_value(1), "tensor parallel GPUs")
      ("pp", po::value<int32_t>(&mem.pipeline_parallel)->default_value(1), "pipeline stages")
      ("weight-dtype", po::value<std::string>(&weight_dtype)->default_value("bf16"),
       "fp32|fp16|bf16|fp8|int8|int4")
      ("kv-dtype", po::value<std::string>(&kv_dtype)->default_value("bf16"), "fp16|bf16|fp8")
      ("memory-utilization", po::value<double>(&mem.memory_utilization)->default_value(0.9),
       "fraction of device memory used")
      ("overhead-gib", po::value<double>(&mem.framework_overhead_gib)->default_value(1.0),
       "framework overhead per GPU")
      ("max-num-batched-tokens", po::value<int32_t>(&mem.max_num_batched_tokens)->default_value(8192),
       "tokens in the largest forward pass (activations)")
      ("max-num-seqs", po::value<int32_t>(&mem.max_num_seqs)->default_value(256),
       "rows of logits in the largest step")
      ("block-size", po::value<int32_t>(&mem.block_size)->default_value(16), "tokens per KV block")
      ("context", po::value<int32_t>(&mem.context_len)->default_value(0),
       "context length for 'concurrent sequences' (0 = the model's window)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab memory: " << Printable(e.what()) << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options;
    return kExitOk;
  }
  auto fail = [&](const std::string& message) {
    std::cerr << "servelab memory: " << Printable(message) << "\n";
    return kExitBadInput;
  };
  if (model_name.empty() || gpu_name.empty()) return fail("--model and --gpu are required");
  auto model = FindModel(model_name);
  if (!model.ok()) return fail("--model: " + model.status().message());
  auto gpu = FindGpu(gpu_name);
  if (!gpu.ok()) return fail("--gpu: " + gpu.status().message());
  auto w = ParseDType(weight_dtype);
  if (!w) return fail("--weight-dtype: '" + weight_dtype + "' is not one of fp32, fp16, bf16, fp8, int8, int4");
  auto kv = ParseDType(kv_dtype);
  if (!kv || (*kv != DType::kFp16 && *kv != DType::kBf16 && *kv != DType::kFp8)) {
    return fail("--kv-dtype: '" + kv_dtype + "' is not one of fp16, bf16, fp8");
  }
  // The ranges and checks `run` applies to the same keys (one validation for both).
  HardwareConfig hw;
  hw.tensor_parallel = mem.tensor_parallel;
  hw.pipeline_parallel = mem.pipeline_parallel;
  hw.memory_utilization = mem.memory_utilization;
  hw.framework_overhead_gib = mem.framework_overhead_gib;
  SchedulerConfig scheduler;
  scheduler.max_num_batched_tokens = mem.max_num_batched_tokens;
  scheduler.max_num_seqs = mem.max_num_seqs;
  scheduler.block_size = mem.block_size;
  BoundsCheck bounds;
  scheduler.VisitFields(bounds);
  const std::map<std::string, std::string> flag_of = {
      {"tensor_parallel", "--tp"}, {"pipeline_parallel", "--pp"},
      {"memory_utilization", "--memory-utilization"}, {"framework_overhead_gib", "--overhead-gib"},
      {"max_num_batched_tokens", "--max-num-batched-tokens"}, {"max_num_seqs", "--max-num-seqs"},
      {"block_size", "--block-size"}};
  const auto flag_error = [&](const std::string& error) {
    const std::string key = error.substr(0, error.find(':'));
    const auto it = flag_of.find(key);
    return fail((it != flag_of.end() ? it->second + " (" + key + ")" : key) +
                error.substr(key.size()));
  };
  if (!bounds.error.empty()) return flag_error(bounds.error);
  if (const Status s = CheckParallelism(*model, hw, ""); !s.ok()) return flag_error(s.message());
  if (mem.context_len < 0 || mem.context_len > model->max_position_embeddings) {
    return fail("--context: " + std::to_string(mem.context_len) + " is outside [0, " +
                std::to_string(model->max_position_embeddings) + "], the window of " + model->name);
  }
  mem.weight_dtype = *w;
  mem.kv_dtype = *kv;
  const MemoryEstimate estimate = EstimateMemory(*model, *gpu, mem);
  std::cout << FormatMemoryReport(*model, *gpu, mem, estimate);
  return kExitOk;
}

}  // namespace servelab
