// An experiment YAML: parse, resolve and parse again (a resolved config must parse to
// itself), then prepare it (checks, workload). Any input may fail, with a message; none
// may crash, hang or read past what it names.
#include <cstdint>
#include <string>

#include "driver/config_yaml.h"
#include "driver/experiment.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ParseExperiment(text, "fuzz.yaml", "/nonexistent");
  if (!config.ok()) {
    if (!config.status().IsBadInput()) fuzz::Broken("a parse error that is not bad input", config.status().message());
    return 0;
  }
  const std::string resolved = EmitResolvedConfig(*config);
  auto again = ParseExperiment(resolved, "config.resolved.yaml", "/nonexistent");
  if (!again.ok()) fuzz::Broken("a resolved config does not parse", again.status().message() + "\n" + resolved);
  if (EmitResolvedConfig(*again) != resolved) fuzz::Broken("resolving is not a fixed point", resolved);
  if (config->workload.num_requests > 100000 || config->workload.has_trace) return 0;
  auto prepared = PrepareExperiment(*config);
  (void)prepared;
  return 0;
}
