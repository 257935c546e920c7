#pragma once
// Typed, strict access to a named extension's free parameters (policy: {name: sjf, ...}).
// Each Get* marks its key as known; Finish() reports keys nobody asked for, with
// "did you mean". Errors name the source location and the dotted key path.
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

  // The first error met, or unknown keys. Call after all Get*.
  Status Finish();

 private:
  const Param* Find(const std::string& key);
  void Fail(const Param& param, const std::string& message);

  const NamedParams& named_;
  std::vector<std::string> known_;
  Status status_;
};

}  // namespace servelab
