#pragma once
// A `sweep:` block: a grid of experiments over dotted config keys.
//
//   sweep:
//     scheduler.policy: [fcfs, {name: sjf, predictor: noisy}]
//     workload.arrival.rate: [4, 8, 12]
//
// Each value is any YAML value, applied to the experiment exactly like
// `--set key=value`, after the command line's --set overrides (so `--set
// workload.arrival={...}` replaces the mapping and the sweep still varies its rate).
// The grid is the cartesian product, axes in file order, the last axis varying fastest.
// Every point is parsed and checked here; an error names the file, the line of the
// sweep value and the key. `sweep` is valid only at the top level.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"

namespace servelab {

inline constexpr int64_t kMaxSweepPoints = 10000;
// Runs of a sweep: its points' replicates summed.
inline constexpr int64_t kMaxSweepRuns = 100000;

struct SweepAxis {
  std::string key;                  // dotted config path as written: "workload.arrival.rate"
  std::vector<std::string> values;  // as written: scalars verbatim, lists and mappings in
                                    // YAML flow style ("{name: sjf, predictor: noisy}")
  std::vector<std::string> wheres;  // per value: "exp.yaml:7", or a command-line origin
};

struct SweepPoint {
  std::vector<size_t> index;  // one value index per axis
  std::string folder;         // result folder name under the sweep's folder; unique
  ExperimentConfig config;    // the experiment with this point's values applied
};

struct Sweep {
  std::vector<SweepAxis> axes;     // file order
  std::vector<SweepPoint> points;  // grid order
  int ignored_sweep_line = 0;      // the file's sweep block, when an axis given to
                                   // LoadSweep replaced it; 0 otherwise
};

// One axis given on the command line instead of the file's sweep block (`compare`).
struct SweepAxisSpec {
  std::string key;
  std::vector<std::string> yaml_values;  // each parsed as YAML, like a --set value
  std::vector<std::string> labels;       // shown in the CSV, and named folders
  std::vector<std::string> wheres;       // message labels: "--policies sjf"
};

// Reads the file's sweep block (or uses `axis` instead; the file's block is then
// ignored), applies `overrides` to every point, and parses every point. Bad input:
// no sweep block, an empty or non-list axis, more than kMaxSweepPoints points (or
// kMaxSweepRuns runs, their replicates summed), an
// axis that overlaps another or that a --set also sets, any point that fails to parse.
StatusOr<Sweep> LoadSweep(const std::string& path, const std::vector<std::string>& overrides,
                          const std::optional<SweepAxisSpec>& axis = std::nullopt);
StatusOr<Sweep> ParseSweep(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir, const std::vector<std::string>& overrides,
                           const std::optional<SweepAxisSpec>& axis = std::nullopt);

// Folder names. A point's default name joins, per axis, "<label>-<value>" with "_":
// `scheduler.policy=sjf, workload.arrival.rate=8` -> "policy-sjf_rate-8". The label is
// the shortest dotted suffix of the key that no other axis shares ("rate", else
// "arrival.rate"); the value is SanitizeName of the value as written (a leading
// "{name: " dropped: {name: sjf, predictor: noisy} -> "sjf-predictor-noisy"), at most
// 48 characters. Names that still collide (compared ignoring case) get "~2", "~3", ... in
// grid order.
//
// SanitizeName keeps letters, digits, '.', '_', '+' and '-', turns every other run of
// characters into one '-', drops such '-' at either end, and gives "empty" for nothing:
// "{name: sjf, predictor: noisy}" -> "name-sjf-predictor-noisy", "sjf:sigma=1.0" ->
// "sjf-sigma-1.0".
std::string SanitizeName(const std::string& text);
// One bad-input Status for the failures of several points ({folder, message}, grid order
// out of `total` points): each distinct message once, with the points it applies to.
Status CombinePointErrors(const std::vector<std::pair<std::string, std::string>>& failures,
                          size_t total);
// Makes `names` unique (ignoring case) by suffixing later duplicates; keeps order.
void MakeUnique(std::vector<std::string>& names);

}  // namespace servelab
