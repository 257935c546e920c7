#include "driver/output_dir.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace servelab {

namespace fs = std::filesystem;

StatusOr<std::unique_ptr<OutputDir>> OutputDir::Open(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return InvalidArgument(dir + ": cannot create output folder: " + ec.message());
  }
  return std::unique_ptr<OutputDir>(new OutputDir(dir));
}

OutputDir::~OutputDir() {
  if (committed_) return;
  for (auto& e : entries_) {
    e.stream.reset();
    std::error_code ec;
    fs::remove(e.temp_path, ec);
  }
}

StatusOr<std::ostream*> OutputDir::Stream(const std::string& name) {
  Entry e;
  e.name = name;
  e.temp_path = (fs::path(dir_) / ("." + name + ".tmp." + std::to_string(::getpid()))).string();
  e.stream = std::make_unique<std::ofstream>(e.temp_path, std::ios::binary | std::ios::trunc);
  if (!*e.stream) return Internal(e.temp_path + ": cannot open for writing");
  std::ostream* out = e.stream.get();
  entries_.push_back(std::move(e));
  return out;
}

Status OutputDir::WriteFile(const std::string& name, const std::string& contents) {
  auto out = Stream(name);
  if (!out.ok()) return out.status();
  (*out)->write(contents.data(), static_cast<std::streamsize>(contents.size()));
  return Status::Ok();
}

Status OutputDir::Commit() {
  for (auto& e : entries_) {
    e.stream->flush();
    if (!*e.stream) return Internal(e.temp_path + ": write failed (disk full?)");
    e.stream->close();
  }
  for (auto& e : entries_) {
    std::error_code ec;
    fs::rename(e.temp_path, fs::path(dir_) / e.name, ec);
    if (ec) return Internal((fs::path(dir_) / e.name).string() + ": " + ec.message());
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace servelab
