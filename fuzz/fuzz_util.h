#pragma once
// Shared by the harnesses: inputs that must go through a file are written to one per
// process, and a broken contract is reported as a crash (libFuzzer then keeps the input).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace servelab::fuzz {

inline std::string WriteInput(const char* suffix, const uint8_t* data, size_t size) {
  const std::string path = "/tmp/servelab_fuzz_" + std::to_string(::getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

[[noreturn]] inline void Broken(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fuzz: contract broken: %.*s\n%.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

}  // namespace servelab::fuzz
