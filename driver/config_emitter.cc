// EmitResolvedConfig: writes a config back as YAML through the same field list the
// parser visits, so the output parses back to the same config.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "core/text.h"
#include "driver/config_yaml.h"

namespace servelab {
namespace {

// Writes a config struct back as YAML through the same field list.
class Emitter {
 public:
  explicit Emitter(YAML::Emitter& out) : out_(out) {}

  void Field(const std::string& key, bool value) { out_ << YAML::Key << key << YAML::Value << value; }
  void Field(const std::string& key, int32_t value, Bounds = kAny) { Int(key, value); }
  void Field(const std::string& key, int64_t value, Bounds = kAny) { Int(key, value); }
  void Field(const std::string& key, double value, Bounds = kAny) {
    out_ << YAML::Key << key << YAML::Value << FormatDouble(value);  // reads back as a float
  }
  void Field(const std::string& key, const std::string& value, Bounds = kAny) {
    out_ << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  }
  // An empty path is an unset one (every path's default): left out, since the parser
  // refuses an empty path, so that a resolved config always parses again.
  void Path(const std::string& key, const std::string& value) {
    if (!value.empty()) Field(key, value);
  }
  template <class E>
  void Enum(const std::string& key, E value, EnumNames<E> names) {
    out_ << YAML::Key << key << YAML::Value << std::string(NameOf(names, value));
  }
  template <class S>
  void Section(const std::string& key, S& section) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    section.VisitFields(*this);
    out_ << YAML::EndMap;
  }
  template <class S>
  void OptionalSection(const std::string& key, S& section, bool& present) {
    if (present) Section(key, section);
  }
  template <class S>
  void List(const std::string& key, std::vector<S>& items) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginSeq;
    for (auto& item : items) {
      out_ << YAML::BeginMap;
      item.VisitFields(*this);
      out_ << YAML::EndMap;
    }
    out_ << YAML::EndSeq;
  }
  void Named(const std::string& key, NamedParams& value, const std::string& name_key = "name",
             bool /*name_required*/ = true) {
    out_ << YAML::Key << key << YAML::Value;
    if (value.params.empty()) {
      Word(value.name);
      return;
    }
    out_ << YAML::BeginMap << YAML::Key << name_key << YAML::Value;
    Word(value.name);
    for (const auto& p : value.params) {
      out_ << YAML::Key << p.key << YAML::Value;
      Word(p.value);
    }
    out_ << YAML::EndMap;
  }
  // A name or parameter as written: plain when it is a word (names, numbers: "sjf",
  // "1e-05", "-3"), so a number reads back as one; double-quoted (control bytes escaped)
  // otherwise, so that it reads back byte for byte.
  void Word(const std::string& text) {
    const bool word = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
             c == '+';
    });
    if (word) {
      out_ << text;
    } else {
      out_ << YAML::DoubleQuoted << text;
    }
  }
  template <class T>
  void Catalog(const std::string& key, T& entry) {
    Section(key, entry);
  }

 private:
  void Int(const std::string& key, int64_t value) {
    out_ << YAML::Key << key << YAML::Value << std::to_string(value);
  }
  YAML::Emitter& out_;
};

}  // namespace

std::string YamlQuoted(const std::string& text) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << text;
  return out.c_str();
}

std::string EmitResolvedConfig(const ExperimentConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  Emitter emitter(out);
  ExperimentConfig copy = config;  // VisitFields is shared with the parser, hence non-const
  copy.VisitFields(emitter);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace servelab
