// A Hugging Face config.json: parsed, or refused as bad input; an accepted one written back
// (ModelConfigJson) parses to the same config.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/model_config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  auto config = ParseModelConfig(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!config.ok()) {
    if (!config.status().IsBadInput()) {
      fuzz::Broken("a config.json error that is not bad input", config.status().message());
    }
    return 0;
  }
  // What servelab writes for a config it accepted reads back to the same config.
  const std::string written = ModelConfigJson(*config);
  auto again = ParseModelConfig(written, "written config.json");
  if (!again.ok()) fuzz::Broken("a written config.json does not parse", again.status().message());
  if (ModelConfigJson(*again) != written) fuzz::Broken("a written config.json changes", written);
  return 0;
}
