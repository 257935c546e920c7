#include "driver/gpu_catalog.h"

#include <gtest/gtest.h>

#include <set>

namespace servelab {
namespace {

TEST(GpuCatalogTest, NamesAreTheDocumentedSet) {
  const std::vector<std::string> expected = {"a100-80gb", "h100-80gb", "h200-141gb", "b200",
                                             "rtx-4090",  "a10",       "l40s"};
  EXPECT_EQ(GpuNames(), expected);
}

TEST(GpuCatalogTest, EveryEntryIsCostable) {
  for (const GpuSpec& gpu : GpuCatalog()) {
    SCOPED_TRACE(gpu.name);
    EXPECT_GT(gpu.memory_gib, 20);
    EXPECT_GT(gpu.mem_bandwidth_gbps, 500);
    EXPECT_GT(gpu.bf16_tflops, 100);
    EXPECT_GE(gpu.fp8_tflops, 0);
    // FP8 tensor cores, where present, double the BF16 rate.
    if (gpu.fp8_tflops > 0) {
      EXPECT_NEAR(gpu.fp8_tflops / gpu.bf16_tflops, 2.0, 0.05);
    }
    EXPECT_GT(gpu.fp32_tflops, 0);
    EXPECT_LT(gpu.fp32_tflops, gpu.bf16_tflops);  // tensor cores beat the FP32 pipes
    EXPECT_GE(gpu.interconnect_gbps, gpu.pcie_gbps);
    EXPECT_GT(gpu.power_w, 0);
    EXPECT_GT(gpu.price_per_hour, 0);
    EXPECT_GE(gpu.sm_count, 72);
  }
}

TEST(GpuCatalogTest, DatasheetFigures) {
  const GpuSpec a100 = FindGpu("a100-80gb").value();
  EXPECT_DOUBLE_EQ(a100.memory_gib, 80.0);  // 81920 MiB
  EXPECT_DOUBLE_EQ(a100.mem_bandwidth_gbps, 2039);
  EXPECT_DOUBLE_EQ(a100.bf16_tflops, 312);
  EXPECT_DOUBLE_EQ(a100.fp8_tflops, 0);
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(FindGpu("h100-80gb")->sm_count, 132);
  EXPECT_DOUBLE_EQ(a100.interconnect_gbps, 300);

  const GpuSpec h100 = FindGpu("h100-80gb").value();
  EXPECT_DOUBLE_EQ(h100.memory_gib, 81559.0 / 1024.0);
  EXPECT_DOUBLE_EQ(h100.mem_bandwidth_gbps, 3350);
  EXPECT_DOUBLE_EQ(h100.bf16_tflops, 989);
  EXPECT_DOUBLE_EQ(h100.fp8_tflops, 1979);

  const GpuSpec h200 = FindGpu("h200-141gb").value();
  EXPECT_DOUBLE_EQ(h200.mem_bandwidth_gbps, 4800);
  EXPECT_DOUBLE_EQ(h200.bf16_tflops, h100.bf16_tflops);  // same Hopper die
  EXPECT_GT(h200.memory_gib, 140);

  // Ada and Ampere PCIe cards: dense BF16 tensor rates, not their FP32 rates.
  EXPECT_DOUBLE_EQ(FindGpu("rtx-4090").value().bf16_tflops, 165.2);
  EXPECT_DOUBLE_EQ(FindGpu("a10").value().bf16_tflops, 125);
  EXPECT_DOUBLE_EQ(FindGpu("l40s").value().bf16_tflops, 362);
  EXPECT_DOUBLE_EQ(FindGpu("a10").value().fp8_tflops, 0);
}

TEST(GpuCatalogTest, NamesAreUnique) {
  const std::vector<std::string> names = GpuNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

TEST(GpuCatalogTest, UnknownNameIsNotFoundWithSuggestion) {
  const StatusOr<GpuSpec> gpu = FindGpu("h100-80g");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gpu.status().message(),
            "Unable to find GPU 'h100-80g' (did you mean 'h100-80gb'?). Valid values are: "
            "a100-80gb, h100-80gb, h200-141gb, b200, rtx-4090, a10, l40s.");
}

}  // namespace
}  // namespace servelab
