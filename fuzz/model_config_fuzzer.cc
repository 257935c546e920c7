// A Hugging Face config.json.
#include <cstdint>
#include <string_view>

#include "engine/model_config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  auto config = ParseModelConfig(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!config.ok() && !config.status().IsBadInput()) {
    fuzz::Broken("a config.json error that is not bad input", config.status().message());
  }
  return 0;
}
