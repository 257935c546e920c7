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

  template <class V>
  void VisitFields(V& v) {
    v.Field("name", name);
    v.Field("memory_gib", memory_gib, kPositive);
    v.Field("mem_bandwidth_gbps", mem_bandwidth_gbps, kPositive);
    v.Field("bf16_tflops", bf16_tflops, kPositive);
    v.Field("fp8_tflops", fp8_tflops, kNonNegative);
    v.Field("fp32_tflops", fp32_tflops, kNonNegative);
    v.Field("interconnect_gbps", interconnect_gbps, kNonNegative);
    v.Field("pcie_gbps", pcie_gbps, kNonNegative);
    v.Field("power_w", power_w, kNonNegative);
    v.Field("price_per_hour", price_per_hour, kNonNegative);
  }
};

}  // namespace servelab
