// An experiment's YAML: the document read strictly (yaml_document.h), --set and sweep
// values applied to it, then the strict parse (config_parser.cc).
#include "driver/config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <sstream>

#include "core/read_file.h"
#include "driver/config_yaml_internal.h"
#include "driver/yaml_document.h"

namespace servelab {
namespace {

bool IsIndex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Sets `key_path` to `value` in the document; returns the normalized key path. Messages
// start with `label`. (yaml-cpp may throw YAML::Exception.)
StatusOr<std::string> SetPath(YAML::Node& root, const std::string& key_path,
                              const YAML::Node& value, const std::string& label) {
  const std::vector<std::string> parts = config_internal::SplitPath(key_path);
  if (parts.empty()) return InvalidArgument(label + ": empty key in path");
  if (value.IsNull()) return InvalidArgument(label + ": missing value");
  std::string normalized;
  YAML::Node cur = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) return InvalidArgument(label + ": empty key in path");
    const bool last = i + 1 == parts.size();
    if (IsIndex(part) && cur.IsSequence()) {
      // (Digits only, but maybe more than any size_t: compared as text first.)
      const size_t index = part.size() > 9 ? cur.size() : std::stoul(part);
      if (index >= cur.size()) {
        return InvalidArgument(label + ": index " + part + " is past the end of " + normalized +
                               " (" + std::to_string(cur.size()) + " items)");
      }
      normalized += "[" + part + "]";
      if (last) {
        cur[index] = value;
      } else {
        YAML::Node next = cur[index];
        cur.reset(next);
      }
      continue;
    }
    normalized = normalized.empty() ? part : normalized + "." + part;
    if (cur.IsDefined() && !cur.IsNull() && !cur.IsMap()) {
      return InvalidArgument(label + ": '" + normalized.substr(0, normalized.rfind('.')) +
                             "' is not a mapping");
    }
    if (last) {
      cur[part] = value;
    } else {
      YAML::Node next = cur[part];
      if (!next.IsDefined() || next.IsNull()) {
        cur[part] = YAML::Node(YAML::NodeType::Map);
        next = cur[part];
      }
      cur.reset(next);
    }
  }
  return normalized;
}

}  // namespace

namespace config_internal {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '.')) parts.push_back(part);
  if (!path.empty() && path.back() == '.') parts.emplace_back();
  return parts;
}

StatusOr<YAML::Node> LoadDocument(const std::string& yaml_text, const std::string& source_name) {
  return LoadYamlMapping(yaml_text, source_name, "experiment");
}

Status ApplyValue(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                  const std::string& label, const std::string& where,
                  std::vector<OverriddenPath>& overridden) {
  try {
    auto normalized = SetPath(root, key_path, value, label);
    if (!normalized.ok()) return normalized.status();
    overridden.push_back({*normalized, where});
  } catch (const YAML::Exception& e) {
    return InvalidArgument(label + ": " + e.what());
  }
  return Status::Ok();
}

Status ApplySet(YAML::Node& root, const std::string& text,
                std::vector<OverriddenPath>& overridden) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--set " + text + ": expected key.path=value");
  }
  const std::string key_path = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  const std::string label = "--set " + key_path;
  if (SplitPath(key_path).front() == "sweep") {
    return InvalidArgument(label + ": the sweep block cannot be overridden; edit the file");
  }
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(label + ": invalid value '" + value_text + "': " + e.msg);
  }
  // A value's own keys obey the document's rules: no duplicates, bounded aliases.
  SERVELAB_RETURN_IF_ERROR(CheckYamlKeys(value, key_path, label));
  // The label names the normalized path ("--set workload.clients[0].rate").
  std::vector<OverriddenPath> one;
  SERVELAB_RETURN_IF_ERROR(ApplyValue(root, key_path, value, label, "", one));
  overridden.push_back({one[0].path, "--set " + one[0].path});
  return Status::Ok();
}

}  // namespace config_internal

StatusOr<ExperimentConfig> ParseExperiment(const std::string& yaml_text,
                                           const std::string& source_name,
                                           const std::string& base_dir,
                                           const std::vector<std::string>& overrides,
                                           LoadNotes* notes) {
  auto root = config_internal::LoadDocument(yaml_text, source_name);
  if (!root.ok()) return root.status();
  if (notes != nullptr) {
    notes->sweep_line = 0;
    for (auto it = root->begin(); it != root->end(); ++it) {
      if (it->first.Scalar() == "sweep") notes->sweep_line = it->first.Mark().line + 1;
    }
  }
  std::vector<config_internal::OverriddenPath> overridden;
  for (const auto& o : overrides) {
    SERVELAB_RETURN_IF_ERROR(config_internal::ApplySet(*root, o, overridden));
  }
  return config_internal::ParseDocument(*root, source_name, base_dir, overridden);
}

StatusOr<ExperimentConfig> LoadExperiment(const std::string& path,
                                          const std::vector<std::string>& overrides,
                                          LoadNotes* notes) {
  auto text = ReadExperimentFile(path);
  if (!text.ok()) return text.status();
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return ParseExperiment(*text, path, base_dir, overrides, notes);
}

StatusOr<std::string> ReadExperimentFile(const std::string& path) {
  return ReadRegularFile(path, kMaxConfigFileBytes, "experiment file");
}

}  // namespace servelab
