#pragma once
// A read-only memory map of a whole file (POSIX mmap), unmapped when destroyed.
#include <cstddef>
#include <filesystem>
#include <span>

#include "core/status.h"

namespace servelab {

class MappedFile {
 public:
  // NotFound when the file cannot be opened; Internal when it cannot be mapped. An
  // empty file maps to an empty span.
  static StatusOr<MappedFile> Open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Stays valid (same address) for the object's life, across moves.
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile(const std::byte* data, size_t size) : data_(data), size_(size) {}
  void Unmap();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace servelab
