#include "driver/config_yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/read_file.h"
#include "driver/config_yaml_internal.h"
#include "core/text.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "driver/yaml_document.h"

namespace servelab {
namespace {

constexpr size_t kMaxParamNameLength = 128;

// Thrown inside this file only; LoadExperiment/ParseExperiment turn it into a Status.
struct ConfigError {
  std::string message;
};

std::string JoinPath(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Labels where a value came from: "file:line", or the label of the override that set it
// ("--set key", or a sweep value's "file:line").
class Locator {
 public:
  Locator(std::string source, std::vector<config_internal::OverriddenPath> overridden,
          KeyLocations* given = nullptr)
      : source_(std::move(source)), overridden_(std::move(overridden)), given_(given) {}

  std::string Where(const std::string& path, const YAML::Node& node) const {
    const config_internal::OverriddenPath* best = nullptr;
    for (const auto& o : overridden_) {
      const bool covers = path == o.path || StartsWith(path, o.path + ".") ||
                          StartsWith(path, o.path + "[");
      if (covers && (best == nullptr || o.path.size() >= best->path.size())) best = &o;
    }
    if (best != nullptr) return best->where;
    if (!node.IsDefined() || node.Mark().is_null()) return source_;
    return source_ + ":" + std::to_string(node.Mark().line + 1);
  }

  // `path` was given in the document, its key at `key`.
  void Given(const std::string& path, const YAML::Node& key) const {
    if (given_ != nullptr) given_->Record(path, Where(path, key));
  }

 private:
  std::string source_;
  std::vector<config_internal::OverriddenPath> overridden_;
  KeyLocations* given_;
};

[[noreturn]] void Fail(const std::string& where, const std::string& path,
                       const std::string& message) {
  throw ConfigError{where + ": " + (path.empty() ? "" : path + ": ") + message};
}

// A duplicate key is an error anywhere in the document (yaml-cpp keeps both silently).
// `budget` bounds the nodes visited: aliases nested in aliases ("billion laughs") expand
// exponentially, and a walk over them would never end.
constexpr int64_t kMaxYamlNodes = 1'000'000;

void CheckDuplicates(const YAML::Node& node, const std::string& path, const Locator& loc,
                     int64_t& budget) {
  if (--budget < 0) {
    Fail(loc.Where(path, node), path,
         "the document expands to more than " + std::to_string(kMaxYamlNodes) +
             " YAML nodes (aliases nested in aliases?)");
  }
  if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) Fail(loc.Where(path, it->first), path, "keys must be plain names");
      const std::string key = it->first.Scalar();
      const int line = it->first.Mark().line + 1;
      auto [pos, inserted] = first_line.emplace(key, line);
      if (!inserted) {
        Fail(loc.Where(JoinPath(path, key), it->first), JoinPath(path, key),
             "duplicate key (first given at line " + std::to_string(pos->second) + ")");
      }
      CheckDuplicates(it->second, JoinPath(path, key), loc, budget);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      CheckDuplicates(node[i], path + "[" + std::to_string(i) + "]", loc, budget);
    }
  }
}

std::string TypeName(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  return "'" + node.Scalar() + "'";
}

// Plain (unquoted, untagged) scalars only stand for numbers and booleans; a quoted one
// ('256', tag "!") or one tagged as a string (!!str 256) is text.
bool IsPlainScalar(const YAML::Node& node) {
  if (!node.IsScalar()) return false;
  const std::string& tag = node.Tag();
  return tag.empty() || tag == "?" || tag == "tag:yaml.org,2002:int" ||
         tag == "tag:yaml.org,2002:float" || tag == "tag:yaml.org,2002:bool";
}

template <class T>
bool ParseNumber(const std::string& text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// Visits a config struct's fields against one YAML mapping.
class Parser {
 public:
  Parser(YAML::Node node, std::string path, const Locator& loc, const std::string& base_dir)
      : node_(std::move(node)), path_(std::move(path)), loc_(loc), base_dir_(base_dir) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
      Fail(loc_.Where(path_, node_), path_, "expected a mapping, got " + TypeName(node_));
    }
  }

  void Field(const std::string& key, bool& value) {
    YAML::Node n = Child(key);
    if (!n) return;
    const std::string& s = Scalar(n, key);
    if (IsPlainScalar(n) && (s == "true" || s == "True" || s == "TRUE")) {
      value = true;
    } else if (IsPlainScalar(n) && (s == "false" || s == "False" || s == "FALSE")) {
      value = false;
    } else {
      Fail(Where(key, n), Path(key), "expected true or false, got " + TypeName(n));
    }
  }
  void Field(const std::string& key, int32_t& value, Bounds bounds = kAny) {
    int64_t wide = value;
    Integer(key, wide, bounds, INT32_MIN, INT32_MAX);
    value = static_cast<int32_t>(wide);
  }
  void Field(const std::string& key, int64_t& value, Bounds bounds = kAny) {
    Integer(key, value, bounds, INT64_MIN, INT64_MAX);
  }
  void Field(const std::string& key, double& value, Bounds bounds = kAny) {
    YAML::Node n = Child(key);
    if (!n) return;
    const std::string& s = Scalar(n, key);
    double parsed = 0;
    if (!IsPlainScalar(n) || !ParseNumber(s, parsed) || !std::isfinite(parsed)) {
      Fail(Where(key, n), Path(key), "expected a number, got " + TypeName(n));
    }
    if (!bounds.Contains(parsed)) {
      Fail(Where(key, n), Path(key), "value " + s + " out of range: must be " + bounds.Describe());
    }
    value = parsed;
  }
  void Field(const std::string& key, std::string& value, Bounds = kAny) {
    YAML::Node n = Child(key);
    if (!n) return;
    value = Scalar(n, key);
  }
  void Path(const std::string& key, std::string& value) {
    YAML::Node n = Child(key);
    if (!n) return;
    const std::string& s = Scalar(n, key);
    if (s.empty()) Fail(Where(key, n), Path(key), "empty path");
    std::filesystem::path p(s);
    if (p.is_relative()) p = std::filesystem::path(base_dir_) / p;
    value = std::filesystem::absolute(p).lexically_normal().string();
  }
  template <class E>
  void Enum(const std::string& key, E& value, EnumNames<E> names) {
    YAML::Node n = Child(key);
    if (!n) return;
    const std::string& s = Scalar(n, key);
    std::vector<std::string> valid;
    for (const auto& entry : names) {
      if (entry.name == s) {
        value = entry.value;
        return;
      }
      valid.emplace_back(entry.name);
    }
    Fail(Where(key, n), Path(key),
         "'" + s + "' is not one of: " + Join(valid, ", ") + DidYouMean(s, valid));
  }
  template <class S>
  void Section(const std::string& key, S& section) {
    YAML::Node n = Child(key);
    Parser sub(n ? n : YAML::Node(), Path(key), loc_, base_dir_);
    section.VisitFields(sub);
    sub.Finish();
  }
  template <class S>
  void OptionalSection(const std::string& key, S& section, bool& present) {
    YAML::Node n = Child(key);
    present = static_cast<bool>(n);
    if (!present) return;
    Parser sub(n, Path(key), loc_, base_dir_);
    section.VisitFields(sub);
    sub.Finish();
  }
  template <class S>
  void List(const std::string& key, std::vector<S>& items) {
    YAML::Node n = Child(key);
    if (!n) return;
    if (!n.IsSequence() || n.size() == 0) {
      Fail(Where(key, n), Path(key), "expected a non-empty list, got " + TypeName(n));
    }
    items.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      Parser sub(n[i], Path(key) + "[" + std::to_string(i) + "]", loc_, base_dir_);
      if (!n[i].IsMap()) Fail(sub.Where("", n[i]), sub.path_, "expected a mapping");
      loc_.Given(sub.path_, n[i]);
      S item;
      item.VisitFields(sub);
      sub.Finish();
      items.push_back(std::move(item));
    }
  }
  void Named(const std::string& key, NamedParams& value, const std::string& name_key = "name",
             bool name_required = true) {
    YAML::Node n = Child(key);
    value.path = Path(key);
    value.base_dir = base_dir_;
    if (!n) return;
    value.where = Where(key, n);
    value.params.clear();
    if (n.IsScalar()) {
      value.name = n.Scalar();
      return;
    }
    if (!n.IsMap()) {
      Fail(value.where, value.path, "expected a name or a mapping with '" + name_key + "'");
    }
    bool has_name = false;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.Scalar();
      const std::string where = loc_.Where(value.path + "." + k, it->first);
      loc_.Given(value.path + "." + k, it->first);
      if (!it->second.IsScalar()) {
        Fail(where, value.path + "." + k, "expected a single value, got " + TypeName(it->second));
      }
      // Parameter names are words, and short: the resolved config writes them back as
      // keys, which must read back byte for byte (YAML escapes other bytes into other
      // characters, and allows no implicit key past 1,024 characters).
      if (k.size() > kMaxParamNameLength) {
        Fail(where, value.path, "a parameter name of " + std::to_string(k.size()) +
                                    " bytes; names are at most " +
                                    std::to_string(kMaxParamNameLength));
      }
      if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
          })) {
        Fail(where, value.path,
             "a parameter name holds bytes other than letters, digits, '_', '-' and '.'");
      }
      if (k == name_key) {
        value.name = it->second.Scalar();
        has_name = true;
      } else {
        value.params.push_back(Param{k, it->second.Scalar(), where});
      }
    }
    if (!has_name && name_required) Fail(value.where, value.path, "missing '" + name_key + "'");
  }
  void Catalog(const std::string& key, ModelSpec& model) {
    YAML::Node n = CatalogEntry(key, model, FindModel,
                                {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "num_key_value_heads", "intermediate_size", "vocab_size",
                                 "max_position_embeddings"});
    if (model.num_attention_heads % model.num_key_value_heads != 0) {
      Fail(Where(key, n), Path(key), "num_attention_heads must be a multiple of num_key_value_heads");
    }
    if (model.IsMoe() &&
        (model.num_experts_per_tok < 1 || model.num_experts_per_tok > model.num_experts)) {
      Fail(Where(key, n), Path(key),
           "num_experts_per_tok must be in [1, num_experts (" + std::to_string(model.num_experts) +
               ")], got " + std::to_string(model.num_experts_per_tok));
    }
    if (!model.IsMoe() && (model.num_experts_per_tok > 0 || model.moe_intermediate_size > 0 ||
                           model.shared_expert_intermediate_size > 0 ||
                           model.first_k_dense_replace > 0)) {
      Fail(Where(key, n), Path(key), "expert settings without num_experts (a dense model)");
    }
    if (model.first_k_dense_replace >= model.num_hidden_layers && model.IsMoe()) {
      Fail(Where(key, n), Path(key),
           "first_k_dense_replace " + std::to_string(model.first_k_dense_replace) +
               " leaves no MoE layer of " + std::to_string(model.num_hidden_layers));
    }
    if (!model.IsMla() && (model.q_lora_rank > 0 || model.qk_nope_head_dim > 0 ||
                           model.qk_rope_head_dim > 0 || model.v_head_dim > 0)) {
      Fail(Where(key, n), Path(key), "latent-attention settings without kv_lora_rank");
    }
    if (model.IsMla() && (model.qk_nope_head_dim < 1 || model.v_head_dim < 1)) {
      Fail(Where(key, n), Path(key),
           "latent attention (kv_lora_rank > 0) needs qk_nope_head_dim >= 1 and v_head_dim >= 1");
    }
    if (model.HeadDim() < 1) {
      Fail(Where(key, n), Path(key),
           "hidden_size " + std::to_string(model.hidden_size) + " is less than num_attention_heads " +
               std::to_string(model.num_attention_heads) + ": set head_dim, or fewer heads");
    }
    // Parameter counts stay exact in int64 (and in the doubles derived from them).
    const double h = model.hidden_size, experts = model.IsMoe() ? model.num_experts : 0;
    const double q = double(model.QDim());
    const double attention =
        model.IsMla()
            ? (model.q_lora_rank > 0 ? (h + q) * model.q_lora_rank : h * q) +
                  h * double(model.KvLatentDim()) +
                  double(model.kv_lora_rank) * model.num_attention_heads *
                      (double(model.qk_nope_head_dim) + model.v_head_dim) +
                  double(model.OutDim()) * h
            : h * (q + 2.0 * double(model.KvDim())) + q * h;
    const double mlp = 3.0 * h * (double(model.intermediate_size) + experts * model.ExpertWidth() +
                                  model.shared_expert_intermediate_size) +
                       h * experts;
    if ((attention + mlp) * model.num_hidden_layers + 2.0 * model.vocab_size * h > 0x1p53) {
      Fail(Where(key, n), Path(key), "more than 2^53 parameters: no model is this large");
    }
  }
  void Catalog(const std::string& key, GpuSpec& gpu) {
    CatalogEntry(key, gpu, FindGpu, {"memory_gib", "mem_bandwidth_gbps", "bf16_tflops"});
  }

  // `key` is valid here but read elsewhere (the top-level `sweep` block).
  void Skip(const std::string& key) { visited_.push_back(key); }

  // Every key of the mapping must have been visited.
  void Finish() {
    if (!node_.IsDefined() || !node_.IsMap()) return;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.Scalar();
      bool known = false;
      for (const auto& v : visited_) known = known || v == key;
      if (!known) {
        Fail(loc_.Where(Path(key), it->first), Path(key),
             "unknown key '" + key + "'" + DidYouMean(key, visited_) +
                 (visited_.empty() ? "" : "; valid keys here: " + Join(visited_, ", ")));
      }
    }
  }

  std::string Where(const std::string& key, const YAML::Node& n) const {
    return loc_.Where(key.empty() ? path_ : Path(key), n);
  }

 private:
  std::string Path(const std::string& key) const { return JoinPath(path_, key); }

  void Integer(const std::string& key, int64_t& value, Bounds bounds, int64_t lo, int64_t hi) {
    YAML::Node n = Child(key);
    if (!n) return;
    const std::string& s = Scalar(n, key);
    int64_t parsed = 0;
    if (!IsPlainScalar(n) || !ParseNumber(s, parsed)) {
      Fail(Where(key, n), Path(key), "expected an integer, got " + TypeName(n));
    }
    if (!bounds.Contains(static_cast<double>(parsed)) || parsed < lo || parsed > hi) {
      Fail(Where(key, n), Path(key), "value " + s + " out of range: must be " + bounds.Describe());
    }
    value = parsed;
  }

  // The value under `key`, or an undefined node. Marks the key as valid here.
  YAML::Node Child(const std::string& key) {
    visited_.push_back(key);
    if (!node_.IsDefined() || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.Scalar() == key) {
        if (it->second.IsNull()) Fail(loc_.Where(Path(key), it->first), Path(key), "missing value");
        loc_.Given(Path(key), it->first);
        return it->second;
      }
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  const std::string& Scalar(const YAML::Node& n, const std::string& key) {
    if (!n.IsScalar()) Fail(Where(key, n), Path(key), "expected a single value, got " + TypeName(n));
    return n.Scalar();
  }

  template <class T, class Finder>
  YAML::Node CatalogEntry(const std::string& key, T& entry, Finder find,
                    const std::vector<std::string>& required) {
    YAML::Node n = Child(key);
    if (!n) Fail(loc_.Where(path_, node_), Path(key), "missing required key '" + key + "'");
    if (n.IsScalar()) {
      auto found = find(n.Scalar());
      if (!found.ok()) Fail(Where(key, n), Path(key), found.status().message());
      entry = *found;
      return n;
    }
    // A custom entry: optionally `base: <catalog name>`, then any field overrides.
    Parser sub(n, Path(key), loc_, base_dir_);
    YAML::Node base = sub.Child("base");
    if (base) {
      auto found = find(sub.Scalar(base, "base"));
      if (!found.ok()) Fail(sub.Where("base", base), sub.Path("base"), found.status().message());
      entry = *found;
    } else {
      entry = T();
      entry.name = "custom";
    }
    entry.VisitFields(sub);
    ConfigJsonAliases(sub, entry);
    sub.Finish();
    Probe probe;
    entry.VisitFields(probe);
    for (const auto& r : required) {
      if (probe.values.count(r) && probe.values[r] <= 0) {
        Fail(Where(key, n), Path(key), "missing required key '" + r + "' (or set 'base')");
      }
    }
    return n;
  }

  // The other config.json names of a model's keys, as Mixtral and DeepSeek write them:
  // num_local_experts and n_routed_experts for num_experts; n_shared_experts shared
  // experts of moe_intermediate_size each for shared_expert_intermediate_size. Given with
  // the key they stand for, they must agree with it.
  static void ConfigJsonAliases(Parser&, GpuSpec&) {}
  static void ConfigJsonAliases(Parser& sub, ModelSpec& model) {
    for (const char* alias : {"num_local_experts", "n_routed_experts"}) {
      YAML::Node given = sub.Child(alias);
      if (!given) continue;
      int32_t experts = 0;
      sub.Field(alias, experts, Bounds{0, 1 << 12});
      if (sub.Child("num_experts") && experts != model.num_experts) {
        Fail(sub.Where(alias, given), sub.Path(alias),
             std::to_string(experts) + " disagrees with num_experts " + std::to_string(model.num_experts));
      }
      model.num_experts = experts;
    }
    if (YAML::Node given = sub.Child("n_shared_experts")) {
      int32_t shared = 0;
      sub.Field("n_shared_experts", shared, Bounds{0, 64});
      const int64_t width = int64_t{shared} * model.ExpertWidth();
      if (sub.Child("shared_expert_intermediate_size") &&
          width != model.shared_expert_intermediate_size) {
        Fail(sub.Where("n_shared_experts", given), sub.Path("n_shared_experts"),
             std::to_string(shared) + " shared experts of width " +
                 std::to_string(model.ExpertWidth()) +
                 " disagree with shared_expert_intermediate_size " +
                 std::to_string(model.shared_expert_intermediate_size));
      }
      if (width > (1 << 22)) {
        Fail(sub.Where("n_shared_experts", given), sub.Path("n_shared_experts"),
             "shared experts " + std::to_string(width) + " wide, more than " + std::to_string(1 << 22));
      }
      model.shared_expert_intermediate_size = static_cast<int32_t>(width);
    }
  }

  // Reads numeric fields back out of a struct (to check required ones were set).
  struct Probe {
    std::map<std::string, double> values;
    template <class T>
    void Field(const std::string& key, T& v, Bounds = kAny) {
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) values[key] = static_cast<double>(v);
    }
  };

  YAML::Node node_;
  std::string path_;
  const Locator& loc_;
  std::string base_dir_;
  std::vector<std::string> visited_;
};

bool IsIndex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Sets `key_path` to `value` in the document; returns the normalized key path. Messages
// start with `label`.
std::string SetPath(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                    const std::string& label) {
  const std::vector<std::string> parts = config_internal::SplitPath(key_path);
  if (parts.empty()) throw ConfigError{label + ": empty key in path"};
  if (value.IsNull()) throw ConfigError{label + ": missing value"};
  std::string normalized;
  YAML::Node cur = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) throw ConfigError{label + ": empty key in path"};
    const bool last = i + 1 == parts.size();
    if (IsIndex(part) && cur.IsSequence()) {
      // (Digits only, but maybe more than any size_t: compared as text first.)
      const size_t index = part.size() > 9 ? cur.size() : std::stoul(part);
      if (index >= cur.size()) {
        throw ConfigError{label + ": index " + part + " is past the end of " + normalized + " (" +
                          std::to_string(cur.size()) + " items)"};
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
    normalized = JoinPath(normalized, part);
    if (cur.IsDefined() && !cur.IsNull() && !cur.IsMap()) {
      throw ConfigError{label + ": '" + normalized.substr(0, normalized.rfind('.')) +
                        "' is not a mapping"};
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

// The 1-based line where a second document starts, or 0: a document marker ('---' or '...'
// at column 0, alone or before a space) after the first document's content (such a line
// always marks a document, even inside a block scalar).
int SecondDocumentLine(const std::string& text) {
  bool content = false, ended = false;
  int line_number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    const auto marker = [&](std::string_view m) {
      return line.starts_with(m) && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    };
    const size_t first = line.find_first_not_of(" \t");
    const bool blank = first == std::string_view::npos || line[first] == '#';
    if (marker("---")) {
      if (content || ended) return line_number;
      // A first '---' may carry content after it ("--- {name: x}").
      if (line.find_first_not_of(" \t", 3) != std::string_view::npos) content = true;
    } else if (marker("...")) {
      ended = content || ended;
    } else if (!blank && line[0] != '%') {
      if (ended) return line_number;
      content = true;
    }
    pos = end + 1;
  }
  return 0;
}

// The 1-based line of the first alias used as a mapping key ("*name : 5"), or 0. A node
// built from an alias carries its anchor's position, so the parser could only name the
// anchor's line for anything wrong with such a key; keys are plain names, so refuse it
// where it is written. (An alias as a value is fine: its content is where it is written.)
class AliasKeyFinder : public YAML::EventHandler {
 public:
  int line = 0;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { Node(); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    if (line == 0 && AtKey()) line = mark.line + 1;
    Node();
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node();
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node();
    open_.push_back({false, 0});
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node();
    open_.push_back({true, 0});
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Open {
    bool is_map;
    int64_t children;  // nodes seen directly inside: in a map, even = key, odd = value
  };
  bool AtKey() const { return !open_.empty() && open_.back().is_map && open_.back().children % 2 == 0; }
  // A node starts inside the innermost open container.
  void Node() {
    if (!open_.empty()) ++open_.back().children;
  }
  std::vector<Open> open_;
};

StatusOr<YAML::Node> LoadDocument(const std::string& yaml_text, const std::string& source_name) {
  return LoadYamlMapping(yaml_text, source_name, "experiment");
}

}  // namespace config_internal

StatusOr<YAML::Node> LoadYamlMapping(const std::string& yaml_text, const std::string& source_name,
                                     const std::string& what) {
  using config_internal::AliasKeyFinder;
  using config_internal::SecondDocumentLine;
  // One per file: YAML::Load reads the first document and ignores the rest.
  // (Not LoadAll: yaml-cpp 0.7's loops forever on some malformed inputs, such as ",".)
  if (const int line = SecondDocumentLine(yaml_text); line > 0) {
    return InvalidArgument(source_name + ":" + std::to_string(line) + ": a second YAML document; one " +
                           what + " per file");
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  {
    std::istringstream in(yaml_text);
    YAML::Parser events(in);
    AliasKeyFinder finder;
    events.HandleNextDocument(finder);
    if (finder.line > 0) {
      return InvalidArgument(source_name + ":" + std::to_string(finder.line) +
                             ": an alias as a key; keys must be plain names");
    }
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return InvalidArgument(source_name + ": expected a mapping of " + what + " keys at the top level");
  }
  try {
    int64_t budget = kMaxYamlNodes;
    CheckDuplicates(root, "", Locator(source_name, {}), budget);
  } catch (const ConfigError& e) {
    return InvalidArgument(e.message);
  }
  return root;
}

namespace config_internal {

Status ApplyValue(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                  const std::string& label, const std::string& where,
                  std::vector<OverriddenPath>& overridden) {
  try {
    overridden.push_back({SetPath(root, key_path, value, label), where});
  } catch (const ConfigError& e) {
    return InvalidArgument(e.message);
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
    // A value's own keys obey the document's rules: no duplicates, bounded aliases.
    int64_t budget = kMaxYamlNodes;
    CheckDuplicates(value, key_path, Locator(label, {}), budget);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(label + ": invalid value '" + value_text + "': " + e.msg);
  } catch (const ConfigError& e) {
    return InvalidArgument(e.message);
  }
  // The label names the normalized path ("--set workload.clients[0].rate").
  std::vector<OverriddenPath> one;
  SERVELAB_RETURN_IF_ERROR(ApplyValue(root, key_path, value, label, "", one));
  overridden.push_back({one[0].path, "--set " + one[0].path});
  return Status::Ok();
}

StatusOr<ExperimentConfig> ParseDocument(const YAML::Node& root, const std::string& source_name,
                                         const std::string& base_dir,
                                         const std::vector<OverriddenPath>& overridden) {
  try {
    ExperimentConfig config;
    config.locations = KeyLocations(source_name);
    Locator loc(source_name, overridden, &config.locations);
    Parser parser(root, "", loc, base_dir.empty() ? std::string(".") : base_dir);
    config.VisitFields(parser);
    parser.Skip("sweep");
    parser.Finish();
    config.source_path = source_name;
    if (config.output.dir.empty()) config.output.dir = "results/" + config.name;
    return config;
  } catch (const ConfigError& e) {
    return InvalidArgument(e.message);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source_name + ": " + e.what());
  }
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
