#pragma once
// Reads Hugging Face safetensors checkpoints, memory-mapped and validated before use.
//
// The format: an 8-byte little-endian header length N, N bytes of a JSON object (space
// padding allowed), then the data section. Each header key other than "__metadata__"
// (a string-to-string map) is a tensor: {"dtype": "BF16", "shape": [rows, cols],
// "data_offsets": [begin, end]}, offsets relative to the data section, elements
// little-endian, row-major. A sharded checkpoint adds model.safetensors.index.json whose
// "weight_map" names, for every tensor, the shard file (in the same folder) holding it.
//
// Open checks everything a later read relies on, and a failure names the file and, where
// there is one, the tensor: the header length lies within the file; the header is a JSON
// object; every dtype is F32, F16 or BF16; shapes are lists of non-negative integers;
// [begin, end) lies within the data section and end - begin == elements x dtype size;
// no two tensors' bytes overlap. Gaps between tensors are allowed (and never read).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "engine/mapped_file.h"

namespace servelab {

// "F32", "F16", "BF16" for the dtypes safetensors files here may hold; "" otherwise.
std::string_view SafetensorsDTypeName(DType dtype);
// 4 for kFp32, 2 for kFp16 and kBf16. REQUIRES: one of those three.
size_t ElementBytes(DType dtype);

// One tensor inside a mapped file. `data` points into the mapping (valid while its
// SafetensorsFile lives) and need not be aligned to the element size: read it with
// ToFloat32 or memcpy.
struct TensorView {
  std::string name;
  DType dtype = DType::kFp32;       // kFp32, kFp16 or kBf16
  std::vector<int64_t> shape;       // row-major; {} is a scalar
  const std::byte* data = nullptr;  // little-endian elements
  size_t bytes = 0;                 // NumElements() x ElementBytes(dtype)

  int64_t NumElements() const;
};

// "[4096, 128]".
std::string ShapeString(std::span<const int64_t> shape);

class SafetensorsFile {
 public:
  // `path` is a .safetensors file, an index (*.index.json), or a folder holding
  // model.safetensors.index.json (preferred) or model.safetensors.
  static StatusOr<SafetensorsFile> Open(const std::filesystem::path& path);

  // Every tensor, sorted by name. For a sharded checkpoint, those the index names.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // Null when there is no such tensor.
  const TensorView* Find(std::string_view name) const;
  // The tensor, checked to have `shape`: NotFound / InvalidArgument naming the tensor,
  // its file and both shapes otherwise.
  StatusOr<const TensorView*> Get(std::string_view name, std::span<const int64_t> shape) const;
  // The file holding `tensor` (one of this object's tensors).
  const std::filesystem::path& FileOf(const TensorView& tensor) const;
  // The files read, index first when sharded.
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // "__metadata__" of every shard, merged (the first file's value wins).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  static StatusOr<SafetensorsFile> OpenSharded(const std::filesystem::path& index_path);
  Status AddFile(const std::filesystem::path& path, std::vector<TensorView>* tensors);
  void Index(std::vector<TensorView> tensors, std::vector<int32_t> file_of);

  std::vector<MappedFile> maps_;
  std::vector<std::filesystem::path> files_;
  std::vector<TensorView> tensors_;
  std::vector<int32_t> file_of_;  // tensors_[i] lives in files_[file_of_[i]]
  std::map<std::string, std::string> metadata_;
};

// Decodes every element of `view` to float32 (exact: F16 and BF16 values, subnormals,
// infinities and NaNs all have float32 images). REQUIRES: out.size() == NumElements().
void ToFloat32(const TensorView& view, std::span<float> out);
std::vector<float> ToFloat32(const TensorView& view);
// Encodes float32 values as little-endian `dtype` elements, rounding to nearest even.
// REQUIRES: out.size() == values.size() x ElementBytes(dtype).
void FromFloat32(std::span<const float> values, DType dtype, std::span<std::byte> out);

}  // namespace servelab
