// The strict parse of an experiment document (config_yaml_internal.h's ParseDocument):
// every key known, every value of its type and in its range, each message naming the file
// and line (or the --set or sweep value) it came from.
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/read_file.h"
#include "core/text.h"
#include "driver/config_yaml.h"
#include "driver/config_yaml_internal.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

constexpr size_t kMaxParamNameLength = 128;

// Thrown inside this file only; ParseDocument turns it into a Status.
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

}  // namespace

namespace config_internal {

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
}  // namespace servelab
