#include "driver/sweep_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "driver/config_yaml.h"
#include "driver/config_yaml_internal.h"
#include "core/text.h"

namespace servelab {
namespace {

using config_internal::OverriddenPath;
using config_internal::SplitPath;

constexpr size_t kMaxValueChars = 48;
constexpr size_t kMaxFolderChars = 200;
constexpr size_t kMaxReportedErrors = 8;

std::string Line(const std::string& source, const YAML::Node& node) {
  if (node.Mark().is_null()) return source;
  return source + ":" + std::to_string(node.Mark().line + 1);
}

// A value as the user wrote it: scalars verbatim, collections in YAML flow style.
std::string AsWritten(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// The entry of the top-level `sweep` mapping: key node and value node.
std::pair<YAML::Node, YAML::Node> SweepEntry(const YAML::Node& root) {
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it->first.Scalar() == "sweep") return {it->first, it->second};
  }
  return {YAML::Node(YAML::NodeType::Undefined), YAML::Node(YAML::NodeType::Undefined)};
}

// True when path `inner` is `outer` or lies beneath it (compared part by part).
bool Covers(const std::vector<std::string>& outer, const std::vector<std::string>& inner) {
  return outer.size() <= inner.size() && std::equal(outer.begin(), outer.end(), inner.begin());
}

// The file's sweep block as axes; checks its shape and keys.
StatusOr<std::vector<SweepAxis>> ReadAxes(const YAML::Node& root, const std::string& source) {
  const auto [key_node, block] = SweepEntry(root);
  if (!key_node.IsDefined()) {
    return InvalidArgument(source + ": no `sweep:` block (a mapping of config keys to lists of "
                           "values, e.g. `workload.arrival.rate: [4, 8]`)");
  }
  const std::string block_where = Line(source, key_node);
  if (!block.IsMap() || block.size() == 0) {
    return InvalidArgument(block_where + ": sweep: expected a mapping of config keys to lists "
                           "of values, e.g. `workload.arrival.rate: [4, 8]`");
  }
  std::vector<SweepAxis> axes;
  for (auto it = block.begin(); it != block.end(); ++it) {
    SweepAxis axis;
    axis.key = it->first.Scalar();
    const std::string where = Line(source, it->first) + ": " + axis.key;
    const std::vector<std::string> parts = SplitPath(axis.key);
    if (parts.empty() || std::find(parts.begin(), parts.end(), "") != parts.end()) {
      return InvalidArgument(where + ": empty key in path");
    }
    if (parts[0] == "sweep") return InvalidArgument(where + ": a sweep cannot vary itself");
    if (Covers(parts, {"output", "dir"}) || Covers({"output", "dir"}, parts)) {
      return InvalidArgument(where + ": each sweep point writes into its own folder under the "
                             "sweep's folder (--out); output.dir cannot be an axis");
    }
    const YAML::Node key = it->first;  // copies: the iterator's pair is a temporary
    const YAML::Node list = it->second;
    if (!list.IsSequence() || list.size() == 0) {
      return InvalidArgument(where + ": expected a non-empty list of values, e.g. [a, b]");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node item = list[i];
      axis.values.push_back(AsWritten(item));
      axis.wheres.push_back(Line(source, item.Mark().is_null() ? key : item));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

// Axes must not overlap each other, and a --set must not set what an axis sets.
Status CheckOverlaps(const std::vector<SweepAxis>& axes,
                     const std::vector<std::string>& overrides) {
  for (size_t a = 0; a < axes.size(); ++a) {
    const auto parts = SplitPath(axes[a].key);
    for (size_t b = 0; b < a; ++b) {
      const auto earlier = SplitPath(axes[b].key);
      if (Covers(parts, earlier) || Covers(earlier, parts)) {
        return InvalidArgument(axes[a].wheres[0] + ": " + axes[a].key + ": overlaps sweep axis '" +
                               axes[b].key + "' (" + axes[b].wheres[0] + ")");
      }
    }
    for (const auto& o : overrides) {
      const std::string key = o.substr(0, o.find('='));
      if (Covers(parts, SplitPath(key))) {
        return InvalidArgument("--set " + key + ": the sweep axis '" + axes[a].key + "' (" +
                               axes[a].wheres[0] + ") sets it at every point");
      }
    }
  }
  return Status::Ok();
}

// Default folder names, one per point (see the header).
std::vector<std::string> DefaultFolders(const std::vector<SweepAxis>& axes,
                                        const std::vector<SweepPoint>& points) {
  std::vector<std::string> labels;
  for (const auto& axis : axes) {
    const auto parts = SplitPath(axis.key);
    std::string label = axis.key;
    for (size_t k = 1; k <= parts.size(); ++k) {
      std::string suffix;
      for (size_t i = parts.size() - k; i < parts.size(); ++i) {
        suffix += (suffix.empty() ? "" : ".") + parts[i];
      }
      bool shared = false;
      for (const auto& other : axes) {
        const bool same_tail = other.key == suffix ||
                               (other.key.size() > suffix.size() &&
                                other.key.ends_with("." + suffix));
        shared = shared || (&other != &axis && same_tail);
      }
      if (!shared) {
        label = suffix;
        break;
      }
    }
    labels.push_back(SanitizeName(label));
  }
  std::vector<std::string> names;
  for (const auto& point : points) {
    std::string name;
    for (size_t a = 0; a < axes.size(); ++a) {
      // "{name: sjf, predictor: noisy}" names like `compare`'s "sjf:predictor=noisy".
      std::string text = axes[a].values[point.index[a]];
      if (text.starts_with("{name: ")) text.erase(0, 7);
      std::string value = SanitizeName(text);
      if (value.size() > kMaxValueChars) value.resize(kMaxValueChars);
      name += (a == 0 ? "" : "_") + labels[a] + "-" + value;
    }
    if (name.size() > kMaxFolderChars) name.resize(kMaxFolderChars);
    names.push_back(std::move(name));
  }
  MakeUnique(names);
  return names;
}

// Applies the --set overrides and then the point's values to `doc` (a fresh copy of
// the file) and parses it into point.config. An error of the whole sweep (the same for
// every point) is returned; an error of this point goes to `bad_point`.
Status ParsePoint(YAML::Node& doc, const std::vector<SweepAxis>& axes,
                  const std::optional<SweepAxisSpec>& spec,
                  const std::vector<std::string>& overrides, const std::string& source_name,
                  const std::string& base_dir, SweepPoint& point, Status& bad_point) {
  std::vector<OverriddenPath> overridden;
  for (const auto& o : overrides) {
    SERVELAB_RETURN_IF_ERROR(config_internal::ApplySet(doc, o, overridden));
  }
  const YAML::Node block = SweepEntry(doc).second;
  for (size_t a = 0; a < axes.size(); ++a) {
    const SweepAxis& axis = axes[a];
    const size_t i = point.index[a];
    YAML::Node value;
    if (spec) {
      try {
        value = YAML::Load(spec->yaml_values[i]);
      } catch (const YAML::Exception& e) {
        return InvalidArgument(axis.wheres[i] + ": invalid value '" + spec->yaml_values[i] +
                               "': " + e.msg);
      }
    } else {
      auto it = block.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(a));
      value = it->second[i];
    }
    bad_point = config_internal::ApplyValue(doc, axis.key, value, axis.wheres[i] + ": " + axis.key,
                                            axis.wheres[i], overridden);
    if (!bad_point.ok()) return Status::Ok();
  }
  auto config = config_internal::ParseDocument(doc, source_name, base_dir, overridden);
  if (!config.ok()) {
    bad_point = config.status();
    return Status::Ok();
  }
  point.config = std::move(*config);
  return Status::Ok();
}

}  // namespace

std::string SanitizeName(const std::string& text) {
  std::string out;
  bool pending_dash = false;
  for (const char c : text) {
    const bool safe = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '+' || c == '-';
    if (!safe) {
      pending_dash = true;
      continue;
    }
    if (pending_dash && !out.empty()) out += '-';
    pending_dash = false;
    out += c;
  }
  return out.empty() ? "empty" : out;
}

Status CombinePointErrors(const std::vector<std::pair<std::string, std::string>>& failures,
                          size_t total) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<size_t, std::string>> seen;  // message -> count, first folder
  for (const auto& [folder, message] : failures) {
    auto [it, inserted] = seen.emplace(message, std::make_pair(size_t{0}, folder));
    if (inserted) order.push_back(message);
    ++it->second.first;
  }
  std::string out;
  for (size_t i = 0; i < order.size() && i < kMaxReportedErrors; ++i) {
    const auto& [count, first] = seen[order[i]];
    out += (i == 0 ? "" : "\n  ") + order[i];
    if (total == 1) continue;
    if (count == total) {
      out += " (all " + std::to_string(total) + " sweep points)";
    } else {
      out += " (sweep point " + first +
             (count > 1 ? " and " + std::to_string(count - 1) + " more" : "") + ")";
    }
  }
  if (order.size() > kMaxReportedErrors) {
    out += "\n  ... and " + std::to_string(order.size() - kMaxReportedErrors) + " more errors";
  }
  return InvalidArgument(out);
}

void MakeUnique(std::vector<std::string>& names) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::set<std::string> taken;
  for (const auto& n : names) taken.insert(lower(n));
  std::set<std::string> used;
  for (auto& name : names) {
    if (used.insert(lower(name)).second) continue;
    for (int k = 2;; ++k) {
      const std::string candidate = name + "~" + std::to_string(k);
      if (!taken.count(lower(candidate)) && used.insert(lower(candidate)).second) {
        name = candidate;
        break;
      }
    }
  }
}

StatusOr<Sweep> ParseSweep(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir, const std::vector<std::string>& overrides,
                           const std::optional<SweepAxisSpec>& axis) {
  auto root = config_internal::LoadDocument(yaml_text, source_name);
  if (!root.ok()) return root.status();
  Sweep sweep;
  if (axis) {
    SERVELAB_CHECK(!axis->yaml_values.empty() && axis->labels.size() == axis->yaml_values.size() &&
                   axis->wheres.size() == axis->yaml_values.size());
    sweep.axes.push_back({axis->key, axis->labels, axis->wheres});
    const YAML::Node key_node = SweepEntry(*root).first;
    if (key_node.IsDefined()) sweep.ignored_sweep_line = key_node.Mark().line + 1;
  } else {
    auto axes = ReadAxes(*root, source_name);
    if (!axes.ok()) return axes.status();
    sweep.axes = std::move(*axes);
  }
  SERVELAB_RETURN_IF_ERROR(CheckOverlaps(sweep.axes, overrides));

  int64_t total = 1;
  for (const auto& a : sweep.axes) {
    total *= static_cast<int64_t>(a.values.size());
    if (total > kMaxSweepPoints) {
      return InvalidArgument(Line(source_name, SweepEntry(*root).first) + ": sweep: the grid has " +
                             "more than " + std::to_string(kMaxSweepPoints) + " points");
    }
  }
  std::vector<size_t> index(sweep.axes.size(), 0);
  for (int64_t p = 0; p < total; ++p) {
    SweepPoint point;
    point.index = index;
    sweep.points.push_back(std::move(point));
    for (size_t a = sweep.axes.size(); a-- > 0;) {  // the last axis varies fastest
      if (++index[a] < sweep.axes[a].values.size()) break;
      index[a] = 0;
    }
  }
  if (axis) {
    std::vector<std::string> names;
    for (const auto& label : axis->labels) names.push_back(SanitizeName(label));
    MakeUnique(names);
    for (auto& point : sweep.points) point.folder = names[point.index[0]];
  } else {
    const std::vector<std::string> names = DefaultFolders(sweep.axes, sweep.points);
    for (size_t p = 0; p < sweep.points.size(); ++p) sweep.points[p].folder = names[p];
  }

  std::vector<std::pair<std::string, std::string>> failures;  // folder, message
  for (size_t p = 0; p < sweep.points.size(); ++p) {
    auto doc = p == 0 ? root : config_internal::LoadDocument(yaml_text, source_name);
    if (!doc.ok()) return doc.status();
    Status bad_point = Status::Ok();
    SERVELAB_RETURN_IF_ERROR(ParsePoint(*doc, sweep.axes, axis, overrides, source_name, base_dir,
                                        sweep.points[p], bad_point));
    if (!bad_point.ok()) failures.emplace_back(sweep.points[p].folder, bad_point.message());
  }
  if (!failures.empty()) return CombinePointErrors(failures, sweep.points.size());
  // Each run's summary is held until the tables are written: points x replicates bounded.
  int64_t runs = 0;
  for (const SweepPoint& point : sweep.points) runs += point.config.replicates;
  if (runs > kMaxSweepRuns) {
    return InvalidArgument(Line(source_name, SweepEntry(*root).first) + ": sweep: " +
                           std::to_string(sweep.points.size()) + " points and their replicates make " +
                           std::to_string(runs) + " runs; at most " + std::to_string(kMaxSweepRuns));
  }
  return sweep;
}

StatusOr<Sweep> LoadSweep(const std::string& path, const std::vector<std::string>& overrides,
                          const std::optional<SweepAxisSpec>& axis) {
  auto text = ReadExperimentFile(path);
  if (!text.ok()) return text.status();
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return ParseSweep(*text, path, base_dir, overrides, axis);
}

}  // namespace servelab
