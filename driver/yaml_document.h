#pragma once
// A YAML file read strictly, for every YAML input servelab reads (an experiment, a sweep,
// a calibrated model): one document, a mapping at the top, and anywhere in it no duplicate
// key (yaml-cpp keeps both silently: a second `fixed_us:` appended by hand would be
// ignored), no alias as a key, and at most a million nodes once aliases are expanded.
// Syntax errors name source:line:column.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace servelab {

// The most YAML nodes a document may expand to, aliases expanded.
constexpr int64_t kMaxYamlNodes = 1'000'000;

// What LoadYamlMapping refuses anywhere in a document, for a node reached otherwise (a
// --set value): a key that is not a plain name, a key given twice, more than kMaxYamlNodes
// nodes. `path` is the node's config path ("workload.clients"), `source` what messages
// name before a node's line ("exp.yaml", "--set workload").
Status CheckYamlKeys(const YAML::Node& node, const std::string& path, const std::string& source);

// `what` names a file's contents in messages: "one <what> per file", "a mapping of
// <what> keys".
StatusOr<YAML::Node> LoadYamlMapping(const std::string& yaml_text, const std::string& source_name,
                                     const std::string& what);

}  // namespace servelab
