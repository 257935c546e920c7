#include "core/host_memory.h"

#include <unistd.h>

#include <cstdio>

namespace servelab {
namespace {

std::string GiB(double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(int64_t{1} << 30));
  return text;
}

}  // namespace

int64_t HostMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return int64_t{pages} * int64_t{page_size};
}

Status CheckFitsHostMemory(double bytes, const std::string& what) {
  const int64_t memory = HostMemoryBytes();
  if (memory == 0 || bytes <= static_cast<double>(memory)) return Status::Ok();
  return InvalidArgument(what + ": " + GiB(bytes) + ", more than this machine's " +
                         GiB(static_cast<double>(memory)) + " of memory");
}

Status CheckFitsDisk(double bytes, const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path existing = fs::absolute(path, ec);
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  const fs::space_info space = fs::space(existing, ec);
  if (ec || bytes <= static_cast<double>(space.available)) return Status::Ok();
  return InvalidArgument(what + ": " + GiB(bytes) + ", more than the " +
                         GiB(static_cast<double>(space.available)) + " free on " +
                         existing.string());
}

}  // namespace servelab
