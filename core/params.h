#pragma once
// Typed, strict access to a named extension's free parameters (policy: {name: sjf, ...}).
// Each Get* marks its key as known; Finish() reports the first bad value, or keys nobody
// asked for, with "did you mean". Errors name the source location and the dotted key
// path. Resolved() lists what was read, defaults included, for the resolved config.
#include <cstdint>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/status.h"

namespace servelab {

class ParamReader {
 public:
  explicit ParamReader(const NamedParams& named) : named_(named) {}

  double GetDouble(const std::string& key, double fallback, Bounds bounds = kAny);
  int64_t GetInt(const std::string& key, int64_t fallback, Bounds bounds = kAny);
  bool GetBool(const std::string& key, bool fallback);
  std::string GetString(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& allowed = {});
  // A file path: relative ones resolve against NamedParams::base_dir (the experiment's
  // folder); the result is absolute. `fallback` "" means the key is required.
  std::string GetPath(const std::string& key, const std::string& fallback = "");
  // Whether `key` was given (a default was not used). Does not mark it as known.
  bool Has(const std::string& key) const;
  // Where `key` stands, as errors name it: "exp.yaml:12: cost_model.path" (the given
  // key's line, else the extension's); for checks of a value beyond its Get*'s bounds.
  std::string Where(const std::string& key) const;

  // The first error met, or unknown keys. Call after all Get*.
  Status Finish();
  // The first error met so far (a bad or missing value); unknown keys are not checked.
  const Status& Error() const { return status_; }
  // The name and every parameter read so far with the value in force (the given one, or
  // the default), in reading order; numbers in canonical form (FormatDouble).
  NamedParams Resolved() const;
  const NamedParams& Named() const { return named_; }

 private:
  const Param* Find(const std::string& key);
  void Fail(const Param& param, const std::string& message);
  void Record(const std::string& key, std::string value, const Param* given);

  const NamedParams& named_;
  std::vector<std::string> known_;
  std::vector<Param> resolved_;
  Status status_;
};

}  // namespace servelab
