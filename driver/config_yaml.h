#pragma once
// The one place that reads experiment YAML. Strict: an unknown key is an error with
// "did you mean"; a wrong type, a duplicate key or an out-of-range value names the key
// path and the line; `--set key.path=value` overrides any key before validation.
// Relative input paths (traces, empirical distributions) resolve against the YAML
// file's folder. No YAML::Node travels past this file.
#include <string>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"

namespace servelab {

// Worth a line on stderr, but not an error.
struct LoadNotes {
  int sweep_line = 0;  // line of a top-level `sweep:` block (a single run ignores it); 0 = none
};

// Reads `path`, applies each override ("scheduler.max_num_seqs=64"; the value is YAML,
// so lists and mappings work: "scheduler.policy={name: fcfs}"), and parses. A top-level
// `sweep:` block is accepted and skipped (cli/sweep_config.h reads it).
StatusOr<ExperimentConfig> LoadExperiment(const std::string& path,
                                          const std::vector<std::string>& overrides = {},
                                          LoadNotes* notes = nullptr);

// The same from text; `source_name` labels messages, `base_dir` anchors relative paths.
StatusOr<ExperimentConfig> ParseExperiment(const std::string& yaml_text,
                                           const std::string& source_name,
                                           const std::string& base_dir,
                                           const std::vector<std::string>& overrides = {},
                                           LoadNotes* notes = nullptr);

// The file's text; NotFound when it cannot be opened.
StatusOr<std::string> ReadExperimentFile(const std::string& path);

// The fully resolved config (every default filled in) as YAML that parses back to the
// same config. Deterministic: same config, same bytes.
std::string EmitResolvedConfig(const ExperimentConfig& config);

// `text` as a YAML double-quoted scalar (quotes, backslashes and control characters
// escaped), for files servelab writes and reads back: a path may hold any of them.
std::string YamlQuoted(const std::string& text);

}  // namespace servelab
