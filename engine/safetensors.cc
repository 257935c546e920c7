#include "engine/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "engine/float16.h"

namespace servelab {
namespace {

using json = nlohmann::json;
static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

constexpr DType kReadable[] = {DType::kFp32, DType::kFp16, DType::kBf16};

std::string Shorten(const json& value) {
  std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

std::optional<uint64_t> AsUnsigned(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

struct Extent {
  uint64_t begin, end;
  const std::string* name;
};

// One header entry -> a TensorView over `data`, or an error naming the tensor.
Status ParseEntry(const std::string& file, const std::string& name, const json& entry,
                  std::span<const std::byte> data, TensorView* view, Extent* extent) {
  const std::string where = file + ": tensor '" + name + "': ";
  if (!entry.is_object()) return InvalidArgument(where + "expected a mapping, got " + Shorten(entry));
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return InvalidArgument(where + "missing '" + key + "'");
  }
  const json& dtype = entry.at("dtype");
  const std::string dtype_name = dtype.is_string() ? dtype.get<std::string>() : Shorten(dtype);
  const DType* found = std::find_if(std::begin(kReadable), std::end(kReadable), [&](DType d) {
    return SafetensorsDTypeName(d) == dtype_name;
  });
  if (found == std::end(kReadable)) {
    return InvalidArgument(where + "unsupported dtype '" + dtype_name +
                           "' (supported: F32, F16, BF16)");
  }
  view->name = name;
  view->dtype = *found;
  const json& shape = entry.at("shape");
  // Elements x element size must stay below 2^63 to compare with the offsets.
  uint64_t bytes = ElementBytes(*found);
  bool shape_ok = shape.is_array();
  for (const json& dim : shape_ok ? shape : json::array()) {
    const std::optional<uint64_t> d = AsUnsigned(dim);
    if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      shape_ok = false;
      break;
    }
    view->shape.push_back(static_cast<int64_t>(*d));
    if (*d != 0 && bytes > (uint64_t{1} << 62) / *d) {
      return InvalidArgument(where + "shape " + Shorten(shape) + " is implausibly large");
    }
    bytes *= *d;
  }
  if (!shape_ok) {
    return InvalidArgument(where + "'shape' must be a list of non-negative integers, got " +
                           Shorten(shape));
  }
  const json& offsets = entry.at("data_offsets");
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = AsUnsigned(offsets[0]);
    end = AsUnsigned(offsets[1]);
  }
  if (!begin || !end || *begin > *end) {
    return InvalidArgument(where + "'data_offsets' must be [begin, end] with 0 <= begin <= end, got " +
                           Shorten(offsets));
  }
  if (*end - *begin != bytes) {
    return InvalidArgument(where + "data_offsets [" + std::to_string(*begin) + ", " +
                           std::to_string(*end) + ") hold " + std::to_string(*end - *begin) +
                           " bytes but shape " + ShapeString(view->shape) + " of " + dtype_name +
                           " needs " + std::to_string(bytes));
  }
  if (*end > data.size()) {
    return InvalidArgument(where + "data_offsets end " + std::to_string(*end) +
                           " is past the end of the data section (" + std::to_string(data.size()) +
                           " bytes): the file is truncated or the header is wrong");
  }
  view->data = data.data() + *begin;
  view->bytes = static_cast<size_t>(bytes);
  *extent = {*begin, *end, &view->name};
  return Status::Ok();
}

Status ParseMetadata(const std::string& file, const json& value,
                     std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return InvalidArgument(file + ": '__metadata__' must map strings to strings, got " + Shorten(value));
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return InvalidArgument(file + ": '__metadata__' key '" + key + "' must be a string, got " +
                             Shorten(v));
    }
    metadata->emplace(key, v.get<std::string>());
  }
  return Status::Ok();
}

// Parses and validates one file's bytes; appends its tensors (unsorted) to `out`.
Status ParseSafetensors(std::span<const std::byte> bytes, const std::string& file,
                        std::vector<TensorView>* out, std::map<std::string, std::string>* metadata) {
  if (bytes.size() < 8) {
    return InvalidArgument(file + ": file is " + std::to_string(bytes.size()) +
                           " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > bytes.size() - 8) {
    return InvalidArgument(file + ": header length " + std::to_string(header_len) +
                           " runs past the end of the file (" + std::to_string(bytes.size()) +
                           " bytes): truncated or not a safetensors file");
  }
  const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    return InvalidArgument(file + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return InvalidArgument(file + ": header must be a JSON object");
  const std::span<const std::byte> data = bytes.subspan(8 + header_len);
  std::vector<Extent> extents;
  extents.reserve(header.size());
  const size_t first = out->size();
  out->reserve(first + header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      SERVELAB_RETURN_IF_ERROR(ParseMetadata(file, entry, metadata));
      continue;
    }
    TensorView& view = out->emplace_back();
    Extent extent{};
    SERVELAB_RETURN_IF_ERROR(ParseEntry(file, name, entry, data, &view, &extent));
    if (extent.end > extent.begin) extents.push_back(extent);
  }
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    const Extent& a = extents[i - 1];
    const Extent& b = extents[i];
    if (a.end > b.begin) {
      return InvalidArgument(file + ": tensors '" + *a.name + "' [" + std::to_string(a.begin) +
                             ", " + std::to_string(a.end) + ") and '" + *b.name + "' [" +
                             std::to_string(b.begin) + ", " + std::to_string(b.end) +
                             ") overlap in the data section");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "F32";
    case DType::kFp16: return "F16";
    case DType::kBf16: return "BF16";
    default: return "";
  }
}

size_t ElementBytes(DType dtype) {
  SERVELAB_CHECK(dtype == DType::kFp32 || dtype == DType::kFp16 || dtype == DType::kBf16);
  return dtype == DType::kFp32 ? 4 : 2;
}

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status SafetensorsFile::AddFile(const std::filesystem::path& path, std::vector<TensorView>* tensors) {
  StatusOr<MappedFile> map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  SERVELAB_RETURN_IF_ERROR(ParseSafetensors(map->bytes(), path.string(), tensors, &metadata_));
  maps_.push_back(std::move(map).value());
  files_.push_back(path);
  return Status::Ok();
}

void SafetensorsFile::Index(std::vector<TensorView> tensors, std::vector<int32_t> file_of) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
  tensors_.clear();
  file_of_.clear();
  for (size_t i : order) {
    tensors_.push_back(std::move(tensors[i]));
    file_of_.push_back(file_of[i]);
  }
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "model.safetensors.index.json", ec)) {
      return OpenSharded(path / "model.safetensors.index.json");
    }
    if (!fs::exists(path / "model.safetensors", ec)) {
      return NotFound(path.string() + ": holds neither model.safetensors nor "
                                      "model.safetensors.index.json");
    }
    return Open(path / "model.safetensors");
  }
  const std::string name = path.filename().string();
  if (name.size() > 11 && name.ends_with(".index.json")) return OpenSharded(path);
  SafetensorsFile file;
  std::vector<TensorView> tensors;
  SERVELAB_RETURN_IF_ERROR(file.AddFile(path, &tensors));
  std::vector<int32_t> file_of(tensors.size(), 0);
  file.Index(std::move(tensors), std::move(file_of));
  return file;
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

StatusOr<const TensorView*> SafetensorsFile::Get(std::string_view name,
                                                 std::span<const int64_t> shape) const {
  const TensorView* t = Find(name);
  const std::string where = files_.empty() ? std::string("(no file)") : files_.front().string();
  if (t == nullptr) return NotFound(where + ": no tensor '" + std::string(name) + "'");
  if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end())) {
    return InvalidArgument(FileOf(*t).string() + ": tensor '" + t->name + "' has shape " +
                           ShapeString(t->shape) + ", expected " + ShapeString(shape));
  }
  return t;
}

const std::filesystem::path& SafetensorsFile::FileOf(const TensorView& tensor) const {
  const auto i = static_cast<size_t>(&tensor - tensors_.data());
  SERVELAB_CHECK(i < tensors_.size());
  return files_[static_cast<size_t>(file_of_[i])];
}

}  // namespace servelab
