#pragma once
// Where each key of an experiment was given, so that a check made after parsing (tensor
// parallelism against the model's heads, a distribution's max against its min, the
// memory check) names the file and line of the key it is about, as the parser's own
// messages do. Filled by the YAML parser (driver/config_yaml.cc), one entry per key that
// was present; plain data, so configs copy it freely.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace servelab {

class KeyLocations {
 public:
  KeyLocations() = default;
  explicit KeyLocations(std::string source) : source_(std::move(source)) {}

  // `path` ("workload.clients[0].rate") was given at `where` ("exp.yaml:12", or
  // "--set workload.clients.0.rate" for an override).
  void Record(std::string path, std::string where);

  // "exp.yaml:12: scheduler.max_model_len": the location of `path`, or of its nearest
  // enclosing key that was given (a default inside a given section is labelled by the
  // section's line), or the file alone.
  std::string Label(std::string_view path) const;

  // A message from code that knows the key but not the file ("workload.output_tokens.max:
  // must be >= min ...") with that key's location in front. `roots` are the top-level
  // key names a message may start with; any other message (one that already names a
  // file, or no key) comes back unchanged.
  Status Locate(const Status& status, const std::vector<std::string>& roots) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::map<std::string, std::string, std::less<>> where_;
};

}  // namespace servelab
