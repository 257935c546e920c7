#include "driver/gpu_catalog.h"

#include "core/text.h"

namespace servelab {
namespace {

// GiB as nvidia-smi reports the board's memory (MiB / 1024): the driver's figure, not
// the marketing GB, is what a serving engine's memory_utilization multiplies.
constexpr double MibToGib(double mib) { return mib / 1024.0; }

// Conventions for every entry:
//   bandwidth         DRAM (HBM or GDDR) peak, GB/s = 1e9 bytes/s.
//   bf16/fp8 tflops   DENSE tensor-core peak (datasheets often print 2:4-sparse figures,
//                     which are twice these).
//   fp32 tflops       non-tensor FP32 peak (fp32 weights).
//   interconnect      GPU-GPU, per direction: NVLink where the board has it, else the
//                     PCIe link (tensor parallelism then goes over PCIe).
//   pcie              host link per direction: Gen4 x16 = 32 GB/s, Gen5 x16 = 64 GB/s
//                     (rounded from 31.5 / 63).
//   sm_count          streaming multiprocessors of the part as shipped (whitepapers:
//                     A100 108, H100 and H200 SXM 132, B200 148, RTX 4090 128, A10 72,
//                     L40S 142).
//   price             INDICATIVE on-demand cloud price per GPU-hour, USD, rounded; real
//                     prices vary by provider, region and commitment. Only cost-per-token
//                     reports read it.
std::vector<GpuSpec> BuildCatalog() {
  std::vector<GpuSpec> gpus;
  // NVIDIA A100 80GB SXM4 (A100 datasheet): 2,039 GB/s HBM2e; BF16 tensor 312 dense
  // (624 sparse); no FP8; FP32 19.5; NVLink 3 600 GB/s total = 300 per direction;
  // PCIe Gen4; 400 W. nvidia-smi: 81920 MiB.
  gpus.push_back({"a100-80gb", MibToGib(81920), 2039, 312, 0, 19.5, 300, 32, 400, 1.50, 108});
  // NVIDIA H100 SXM5 80GB (H100 datasheet): 3.35 TB/s HBM3; BF16 989 dense (1,979
  // sparse); FP8 1,979 dense; FP32 67; NVLink 4 900 GB/s total = 450 per direction;
  // PCIe Gen5; 700 W. nvidia-smi: 81559 MiB.
  gpus.push_back({"h100-80gb", MibToGib(81559), 3350, 989, 1979, 67, 450, 64, 700, 2.50, 132});
  // NVIDIA H200 SXM 141GB (H200 datasheet): 4.8 TB/s HBM3e; same Hopper compute as
  // H100 SXM (BF16 989, FP8 1,979 dense, FP32 67); NVLink 900 GB/s total; PCIe Gen5;
  // up to 700 W. nvidia-smi: 143771 MiB.
  gpus.push_back({"h200-141gb", MibToGib(143771), 4800, 989, 1979, 67, 450, 64, 700, 3.50, 132});
  // NVIDIA B200 in HGX B200 (HGX datasheet, 8 GPUs: FP16/BF16 36 PFLOPS and FP8 72
  // PFLOPS with sparsity, FP32 600 TFLOPS => per GPU 2,250 / 4,500 dense, 75 FP32);
  // HBM3e bandwidth: 7.7 TB/s per GPU in the HGX B200 datasheet (launch material says
  // "up to 8 TB/s"; we take the lower, system-level figure); NVLink 5 1.8 TB/s total =
  // 900 per direction; PCIe Gen5 to the host; 1,000 W. nvidia-smi: 183359 MiB.
  gpus.push_back({"b200", MibToGib(183359), 7700, 2250, 4500, 75, 900, 64, 1000, 5.00, 148});
  // NVIDIA GeForce RTX 4090 (Ada Lovelace whitepaper): 1,008 GB/s GDDR6X; BF16 tensor
  // 165.2 dense with FP32 accumulate (the FP16-accumulate 330 figure does not apply to
  // BF16 training/inference kernels); FP8 330.3 dense with FP32 accumulate; FP32 82.6;
  // no NVLink, PCIe Gen4 x16; 450 W. nvidia-smi: 24564 MiB.
  gpus.push_back({"rtx-4090", MibToGib(24564), 1008, 165.2, 330.3, 82.6, 32, 32, 450, 0.40, 128});
  // NVIDIA A10 (A10 datasheet): 600 GB/s GDDR6; BF16 tensor 125 dense (250 sparse); no
  // FP8; FP32 31.2; PCIe Gen4 x16 only; 150 W. nvidia-smi: 23028 MiB (ECC on).
  gpus.push_back({"a10", MibToGib(23028), 600, 125, 0, 31.2, 32, 32, 150, 0.75, 72});
  // NVIDIA L40S (L40S datasheet): 864 GB/s GDDR6; BF16 tensor 362.05 dense (733
  // sparse); FP8 733 dense (1,466 sparse); FP32 91.6; PCIe Gen4 x16 only; 350 W.
  // nvidia-smi: 46068 MiB (ECC on).
  gpus.push_back({"l40s", MibToGib(46068), 864, 362, 733, 91.6, 32, 32, 350, 1.00, 142});
  return gpus;
}

}  // namespace

const std::vector<GpuSpec>& GpuCatalog() {
  static const std::vector<GpuSpec> catalog = BuildCatalog();
  return catalog;
}

std::vector<std::string> GpuNames() {
  std::vector<std::string> names;
  for (const GpuSpec& gpu : GpuCatalog()) names.push_back(gpu.name);
  return names;
}

StatusOr<GpuSpec> FindGpu(std::string_view name) {
  for (const GpuSpec& gpu : GpuCatalog()) {
    if (gpu.name == name) return gpu;
  }
  return NotFound(UnknownNameMessage("GPU", name, GpuNames()));
}

}  // namespace servelab
