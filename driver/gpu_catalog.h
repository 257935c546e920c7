#pragma once
// The built-in GPUs: datasheet figures for the cost model, the memory formula and the
// cost-per-token reports. Each entry in gpu_catalog.cc cites its sources. Custom GPUs
// come from YAML (hardware.gpu) with the GpuSpec keys.
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "driver/gpu_spec.h"

namespace servelab {

// All catalog GPUs, in a fixed order (data center first, then PCIe cards).
const std::vector<GpuSpec>& GpuCatalog();
// Their names: a100-80gb, h100-80gb, h200-141gb, b200, rtx-4090, a10, l40s.
std::vector<std::string> GpuNames();
// NotFound "Unable to find GPU 'x' (did you mean ...?). Valid values are: ..." when
// `name` is not in the catalog. Names match exactly (lower case).
StatusOr<GpuSpec> FindGpu(std::string_view name);

}  // namespace servelab
