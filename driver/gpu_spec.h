#pragma once
// One GPU model's datasheet figures. Catalog entries are in gpu_catalog.cc; custom GPUs
// are given in YAML under hardware.gpu with the same keys.
#include <string>

#include "core/fields.h"

namespace servelab {

struct GpuSpec {
  std::string name;               // catalog name, e.g. "a100-80gb"
  double memory_gib = 0;          // device memory as the driver reports it (nvidia-smi), GiB
  double mem_bandwidth_gbps = 0;  // HBM/GDDR bandwidth, GB/s (1e9 bytes/s)
  double bf16_tflops = 0;         // dense BF16/FP16 tensor-core peak (no sparsity), TFLOP/s
  double fp8_tflops = 0;          // dense FP8 tensor-core peak; 0 = no FP8 tensor cores
  double fp32_tflops = 0;         // FP32 (non-tensor) peak, for fp32 weights
  double interconnect_gbps = 0;   // GPU-GPU bandwidth per direction (NVLink, else PCIe), GB/s
  double pcie_gbps = 0;           // host link bandwidth per direction, GB/s (swap)
  double power_w = 0;             // board power (TDP), W
  double price_per_hour = 0;      // indicative on-demand cloud price, USD per GPU-hour
  // Streaming multiprocessors: the grid a kernel fills (the split-KV decode form of
  // sim/op_model.h needs it). 0: unknown.
  int32_t sm_count = 0;

  template <class V>
  void VisitFields(V& v) {
    v.Field("name", name);
    // Ranges far wider than any real part, narrow enough that no product of them leaves
    // a double's exact range or a step's time the int64 nanoseconds.
    v.Field("memory_gib", memory_gib, Bounds{1e-3, 1e6});
    v.Field("mem_bandwidth_gbps", mem_bandwidth_gbps, Bounds{1e-3, 1e7});
    v.Field("bf16_tflops", bf16_tflops, Bounds{1e-6, 1e7});
    v.Field("fp8_tflops", fp8_tflops, Bounds{0, 1e7});
    v.Field("fp32_tflops", fp32_tflops, Bounds{0, 1e7});
    v.Field("interconnect_gbps", interconnect_gbps, Bounds{0, 1e7});
    v.Field("pcie_gbps", pcie_gbps, Bounds{0, 1e7});
    v.Field("power_w", power_w, Bounds{0, 1e7});
    v.Field("price_per_hour", price_per_hour, Bounds{0, 1e9});
    v.Field("sm_count", sm_count, Bounds{0, 1e5});
  }
};

}  // namespace servelab
