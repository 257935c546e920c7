#pragma once
// Writes safetensors files that SafetensorsFile (and Hugging Face's readers) accept.
//
// Layout: 8-byte little-endian header length N; N bytes of compact JSON with sorted keys,
// padded with spaces so N (and so the data section's start) is a multiple of 8; then the
// tensors' bytes back to back, no gaps. Tensors go in the order given, stably sorted by
// element size, widest first, so every tensor starts aligned to its element size. The
// same tensors and bytes give a byte-identical file.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace servelab {

struct TensorSpec {
  std::string name;             // unique, not "__metadata__"
  DType dtype = DType::kFp32;   // kFp32, kFp16 or kBf16
  std::vector<int64_t> shape;   // non-negative dims; {} is a scalar

  size_t Bytes() const;         // elements x element size
};

// Produces tensor `index`'s bytes (little-endian elements of its dtype) into `out`, which
// holds exactly tensors[index].Bytes(). Called once per tensor, in file order.
using TensorFiller = std::function<void(size_t index, std::span<std::byte> out)>;

// The 8-byte length, the padded JSON header, in file order. REQUIRES: names unique and
// not "__metadata__", dtypes one of the three, dims >= 0.
std::string SafetensorsHeader(std::span<const TensorSpec> tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Writes `path` (through `path`.tmp, renamed when complete). Internal on I/O failure.
Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorSpec> tensors,
                        const TensorFiller& fill,
                        const std::map<std::string, std::string>& metadata = {});

// Every tensor from float32 values, encoded to its dtype (round to nearest even).
// REQUIRES: values[i].size() == elements of tensors[i].
Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorSpec> tensors,
                        std::span<const std::vector<float>> values,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace servelab
