#include "engine/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <set>

#include "engine/safetensors.h"

namespace servelab {
namespace {

// Positions of `tensors` in file order: stable, widest elements first.
std::vector<size_t> FileOrder(std::span<const TensorSpec> tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ElementBytes(tensors[a].dtype) > ElementBytes(tensors[b].dtype);
  });
  return order;
}

}  // namespace

size_t TensorSpec::Bytes() const {
  size_t n = ElementBytes(dtype);
  for (int64_t d : shape) {
    SERVELAB_CHECK(d >= 0);
    n *= static_cast<size_t>(d);
  }
  return n;
}

std::string SafetensorsHeader(std::span<const TensorSpec> tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();  // std::map underneath: sorted keys
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (size_t i : FileOrder(tensors)) {
    const TensorSpec& t = tensors[i];
    SERVELAB_CHECK_MSG(t.name != "__metadata__" && names.insert(t.name).second,
                       "duplicate or reserved tensor name '" + t.name + "'");
    const uint64_t end = offset + t.Bytes();
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t length = json.size();
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((length >> (8 * b)) & 0xff);
  return out + json;
}

Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorSpec> tensors,
                        const TensorFiller& fill,
                        const std::map<std::string, std::string>& metadata) {
  const std::string header = SafetensorsHeader(tensors, metadata);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return Internal(tmp.string() + ": cannot create");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<std::byte> buffer;
  for (size_t i : FileOrder(tensors)) {
    buffer.assign(tensors[i].Bytes(), std::byte{0});
    fill(i, buffer);
    out.write(reinterpret_cast<const char*>(buffer.data()),
              static_cast<std::streamsize>(buffer.size()));
  }
  out.close();
  std::error_code ec;
  if (!out) {
    std::filesystem::remove(tmp, ec);
    return Internal(path.string() + ": write failed (disk full?)");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal(path.string() + ": cannot rename from " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorSpec> tensors,
                        std::span<const std::vector<float>> values,
                        const std::map<std::string, std::string>& metadata) {
  SERVELAB_CHECK(values.size() == tensors.size());
  return WriteSafetensors(
      path, tensors,
      [&](size_t i, std::span<std::byte> out) { FromFloat32(values[i], tensors[i].dtype, out); },
      metadata);
}

}  // namespace servelab
