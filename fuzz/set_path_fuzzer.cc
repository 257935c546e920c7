// A --set override ("key.path=value", the value YAML) on a valid experiment.
#include <cstdint>
#include <string>

#include "driver/config_yaml.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  static const std::string kBase =
      "name: f\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
      "workload: {num_requests: 10, clients: [{name: a}, {name: b}]}\n";
  const std::string set(reinterpret_cast<const char*>(data), size);
  auto config = ParseExperiment(kBase, "fuzz.yaml", "/nonexistent", {set});
  if (!config.ok() && !config.status().IsBadInput()) {
    fuzz::Broken("a --set error that is not bad input", config.status().message());
  }
  if (config.ok()) {
    auto again = ParseExperiment(EmitResolvedConfig(*config), "config.resolved.yaml", "/nonexistent");
    if (!again.ok()) fuzz::Broken("a resolved config does not parse", again.status().message());
  }
  return 0;
}
