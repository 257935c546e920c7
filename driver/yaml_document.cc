// Reading a YAML file strictly (yaml_document.h): one document, plain keys, each once.
#include "driver/yaml_document.h"

#include <yaml-cpp/eventhandler.h>

#include <map>
#include <sstream>
#include <string_view>
#include <vector>

namespace servelab {
namespace {

std::string JoinKey(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// "source:line" of `node`, or the source alone for a node without a place.
std::string Where(const std::string& source, const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) return source;
  return source + ":" + std::to_string(node.Mark().line + 1);
}

Status KeyError(const std::string& source, const YAML::Node& node, const std::string& path,
                const std::string& message) {
  return InvalidArgument(Where(source, node) + ": " + (path.empty() ? "" : path + ": ") + message);
}

// `budget` bounds the nodes visited: aliases nested in aliases ("billion laughs") expand
// exponentially, and a walk over them would never end.
Status CheckKeys(const YAML::Node& node, const std::string& path, const std::string& source,
                 int64_t& budget) {
  if (--budget < 0) {
    return KeyError(source, node, path,
                    "the document expands to more than " + std::to_string(kMaxYamlNodes) +
                        " YAML nodes (aliases nested in aliases?)");
  }
  if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) return KeyError(source, it->first, path, "keys must be plain names");
      const std::string key = it->first.Scalar();
      const int line = it->first.Mark().line + 1;
      auto [pos, inserted] = first_line.emplace(key, line);
      if (!inserted) {
        return KeyError(source, it->first, JoinKey(path, key),
                        "duplicate key (first given at line " + std::to_string(pos->second) + ")");
      }
      SERVELAB_RETURN_IF_ERROR(CheckKeys(it->second, JoinKey(path, key), source, budget));
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      SERVELAB_RETURN_IF_ERROR(CheckKeys(node[i], path + "[" + std::to_string(i) + "]", source, budget));
    }
  }
  return Status::Ok();
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

}  // namespace

Status CheckYamlKeys(const YAML::Node& node, const std::string& path, const std::string& source) {
  int64_t budget = kMaxYamlNodes;
  return CheckKeys(node, path, source, budget);
}

StatusOr<YAML::Node> LoadYamlMapping(const std::string& yaml_text, const std::string& source_name,
                                     const std::string& what) {
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
  SERVELAB_RETURN_IF_ERROR(CheckYamlKeys(root, "", source_name));
  return root;
}

}  // namespace servelab
