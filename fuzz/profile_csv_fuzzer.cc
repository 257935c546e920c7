// A profile CSV (servelab's own layout or Vidur's).
#include <cstdint>

#include "driver/profile_table.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  const std::string path = fuzz::WriteInput(".csv", data, size);
  auto table = ReadProfile(path);
  if (!table.ok() && !table.status().IsBadInput()) {
    fuzz::Broken("a profile error that is not bad input", table.status().message());
  }
  return 0;
}
