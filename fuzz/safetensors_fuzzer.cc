// A safetensors file: the header is validated against the file before any tensor is
// read; then every tensor's bytes are touched.
#include <cstdint>
#include <string>

#include "engine/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  const std::string path = fuzz::WriteInput(".safetensors", data, size);
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  uint64_t sum = 0;
  for (const TensorView& t : file->tensors()) {
    if (file->Find(t.name) != &t) fuzz::Broken("a listed tensor is not found", t.name);
    for (size_t i = 0; i < t.bytes; ++i) sum += static_cast<uint8_t>(t.data[i]);
  }
  return static_cast<int>(sum & 0);
}
