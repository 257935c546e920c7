// SafetensorsFile::OpenSharded: model.safetensors.index.json and its shard files.
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/read_file.h"
#include "engine/safetensors.h"

namespace servelab {

StatusOr<SafetensorsFile> SafetensorsFile::OpenSharded(const std::filesystem::path& index_path) {
  using json = nlohmann::json;
  const std::string index_name = index_path.string();
  auto text = ReadRegularFile(index_name, kMaxConfigFileBytes, "safetensors index");
  if (!text.ok()) return text.status();
  json index;
  try {
    index = json::parse(*text);
  } catch (const json::exception& e) {
    return InvalidArgument(index_name + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return InvalidArgument(index_name + ": key 'weight_map': expected a mapping of tensor names "
                                        "to shard files");
  }
  // Shard file -> the tensors the index places there (std::map: files open in name order).
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    const std::string where = index_name + ": weight_map: tensor '" + tensor + "': ";
    if (!shard.is_string()) return InvalidArgument(where + "expected a shard file name");
    const std::string file = shard.get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      return InvalidArgument(where + "shard '" + file + "' must be a file name in the index's folder");
    }
    shards[file].push_back(tensor);
  }
  if (shards.empty()) return InvalidArgument(index_name + ": key 'weight_map': names no tensors");

  SafetensorsFile result;
  result.files_.push_back(index_path);
  std::vector<TensorView> tensors;
  std::vector<int32_t> file_of;
  for (const auto& [file, names] : shards) {
    const std::filesystem::path shard_path = index_path.parent_path() / file;
    std::vector<TensorView> in_shard;
    const Status status = result.AddFile(shard_path, &in_shard);
    if (!status.ok()) {
      const std::string what = index_name + ": weight_map: tensor '" + names.front() +
                               "' is in shard '" + file + "', which ";
      if (status.code() == StatusCode::kNotFound) {
        return NotFound(what + "cannot be opened: " + status.message());
      }
      return Status(status.code(), what + "is invalid: " + status.message());
    }
    std::unordered_map<std::string, size_t> by_name;
    for (size_t i = 0; i < in_shard.size(); ++i) by_name.emplace(in_shard[i].name, i);
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        return InvalidArgument(index_name + ": weight_map: tensor '" + name +
                               "' is not in shard '" + shard_path.string() + "'");
      }
      tensors.push_back(std::move(in_shard[it->second]));
      file_of.push_back(static_cast<int32_t>(result.files_.size() - 1));
    }
  }
  result.Index(std::move(tensors), std::move(file_of));
  return result;
}

}  // namespace servelab
