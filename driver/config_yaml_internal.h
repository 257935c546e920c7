#pragma once
// The YAML reader's lower layer, shared by config_yaml.cc (one experiment: the document
// and its overrides), config_parser.cc (its strict parse) and sweep_config.cc (a grid of
// them). Nothing outside those files includes this: no YAML::Node travels past the parser.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"

namespace servelab::config_internal {

// A config path whose value came from somewhere other than the file's own text, and the
// label its messages carry instead of the node's line: "--set scheduler.policy", or
// "exp.yaml:7" for a sweep value. The longest matching path wins, so a sweep value under
// a --set mapping is labelled by the sweep.
struct OverriddenPath {
  std::string path;   // normalized: "workload.clients[0].rate"
  std::string where;
};

// Parses `yaml_text` into a top-level mapping (an empty document is an empty mapping) and
// rejects duplicate keys anywhere. Syntax errors name source:line:column.
StatusOr<YAML::Node> LoadDocument(const std::string& yaml_text, const std::string& source_name);

// Sets `key_path` (dots between keys; a number indexes a list: "workload.clients.0.rate")
// to `value` in `root`, creating missing mappings. Messages start with `label`
// ("--set scheduler.x"). On success appends {normalized path, where} to `overridden`.
Status ApplyValue(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                  const std::string& label, const std::string& where,
                  std::vector<OverriddenPath>& overridden);

// "key.path=value" from --set: the value is YAML text. Messages start with "--set key".
Status ApplySet(YAML::Node& root, const std::string& text,
                std::vector<OverriddenPath>& overridden);

// The strict parse of an (already overridden) document. A top-level `sweep` key is
// skipped: it describes a grid of experiments, not one.
StatusOr<ExperimentConfig> ParseDocument(const YAML::Node& root, const std::string& source_name,
                                         const std::string& base_dir,
                                         const std::vector<OverriddenPath>& overridden);

// "a.b.0.c" -> {"a", "b", "0", "c"}; empty parts are kept (callers reject them).
std::vector<std::string> SplitPath(const std::string& path);

}  // namespace servelab::config_internal
