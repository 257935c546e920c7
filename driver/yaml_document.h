#pragma once
// A YAML file read strictly, for every YAML input servelab reads (an experiment, a sweep,
// a calibrated model): one document, a mapping at the top, and anywhere in it no duplicate
// key (yaml-cpp keeps both silently: a second `fixed_us:` appended by hand would be
// ignored), no alias as a key, and at most a million nodes once aliases are expanded.
// Syntax errors name source:line:column.
#include <yaml-cpp/yaml.h>

#include <string>

#include "core/status.h"

namespace servelab {

// `what` names a file's contents in messages: "one <what> per file", "a mapping of
// <what> keys".
StatusOr<YAML::Node> LoadYamlMapping(const std::string& yaml_text, const std::string& source_name,
                                     const std::string& what);

}  // namespace servelab
