#pragma once
// Test helpers: a per-test temporary folder, raw file I/O, hand-made safetensors bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace servelab::testing {

// A fresh folder named after the running test and this process (builds elsewhere may
// run the same test at the same time), removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Parameterized names hold '/': one folder level, not nested ones left behind.
    std::string name = "servelab_" + std::string(info->test_suite_name()) + "_" + info->name() +
                       "_" + std::to_string(::getpid());
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// 8-byte little-endian length + `header` + `data`: a safetensors file written by hand.
inline std::string SafetensorsBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((uint64_t{header.size()} >> (8 * b)) & 0xff);
  return out + header + data;
}

}  // namespace servelab::testing
