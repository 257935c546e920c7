#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace servelab {
namespace {

std::string Bytes(int64_t n) {
  if (n >= (int64_t{1} << 20)) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

}  // namespace

StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes,
                                      std::string_view what) {
  const std::string w(what);
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    return NotFound(path + ": cannot open the " + w + ": " + std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgument(path + ": the " + w + " is not a regular file" +
                           (S_ISDIR(info.st_mode) ? " (a directory)" : ""));
  }
  // O_NONBLOCK: should the path have become a FIFO since, open must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return NotFound(path + ": cannot open the " + w + ": " + std::strerror(err));
  }
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": the " + w + " is not a regular file");
  }
  if (info.st_size > max_bytes) {
    ::close(fd);
    return InvalidArgument(path + ": the " + w + " is " + Bytes(info.st_size) +
                           ", over the " + Bytes(max_bytes) + " limit");
  }
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Internal(path + ": reading the " + w + ": " + std::strerror(err));
    }
    if (n == 0) break;  // shrank while reading: keep what is there
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(done);
  return text;
}

}  // namespace servelab
