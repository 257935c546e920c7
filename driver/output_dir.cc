#include "driver/output_dir.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace servelab {

namespace fs = std::filesystem;

namespace {

// The staging folder of `dir` for process `pid`'s `serial`th OutputDir: beside it, so
// renames stay on one filesystem and nothing of a run that dies mid-way is left inside
// the result folder; one per OutputDir, so two open on one folder (a command writing
// several files there) never share or remove each other's.
fs::path StagingPath(const fs::path& dir, long pid, uint64_t serial) {
  // std::string("."), not ".": GCC 12's -Wrestrict misfires on "." + a temporary string.
  return dir.parent_path() / (std::string(".") + dir.filename().string() + ".staging." + std::to_string(pid) +
                              "." + std::to_string(serial));
}

// A killed process whose parent has not reaped it (a container's init often never does)
// is a zombie: kill(pid, 0) still succeeds, but it will write nothing more.
bool IsZombie(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');  // the command name may hold spaces and ')'
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

bool ProcessAlive(long pid) {
  if (pid <= 0) return false;
  const bool exists = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  return exists && !IsZombie(pid);
}

// Removes what runs that were killed left: staging folders of `dir` (and the temporaries
// older builds wrote inside it, ".NAME.tmp.PID") whose process is gone.
void RemoveStaleStaging(const fs::path& dir) {
  std::error_code ec;
  const std::string staging_prefix = std::string(".") + dir.filename().string() + ".staging.";
  for (const fs::path& folder : {dir.parent_path(), dir}) {
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      size_t at = std::string::npos;
      if (folder == dir.parent_path() && name.starts_with(staging_prefix)) {
        at = staging_prefix.size();
      } else if (folder == dir && name.starts_with(".") && name.find(".tmp.") != std::string::npos) {
        at = name.rfind(".tmp.") + 5;
      }
      if (at == std::string::npos || at >= name.size()) continue;
      // The pid's digits, then (a staging folder since 2026-12-03) "." and a serial's.
      const size_t pid_end = name.find_first_not_of("0123456789", at);
      if (pid_end == at || (pid_end != std::string::npos &&
                            (name[pid_end] != '.' || pid_end + 1 == name.size() ||
                             name.find_first_not_of("0123456789", pid_end + 1) != std::string::npos))) {
        continue;
      }
      if (ProcessAlive(std::stol(name.substr(at, 18)))) continue;
      std::error_code remove_ec;
      fs::remove_all(it->path(), remove_ec);
    }
  }
}

}  // namespace

Status CheckOutputPlaces(const std::string& dir, const std::vector<std::string>& files,
                         const std::vector<std::string>& inputs) {
  std::error_code ec;
  for (fs::path at = fs::absolute(dir, ec).lexically_normal(); !at.empty(); at = at.parent_path()) {
    const fs::file_status st = fs::status(at, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) {
        return InvalidArgument(at.string() + ": is a file, where the output folder " + dir + " goes");
      }
      break;
    }
    if (at == at.parent_path()) break;
  }
  for (const std::string& name : files) {
    const fs::path at = fs::path(dir) / name;
    const fs::file_status st = fs::symlink_status(at, ec);
    if (fs::is_directory(st)) {
      return InvalidArgument(at.string() + ": is a folder (an output file goes there)");
    }
    // A device, a FIFO or a socket there (--out /dev/null) would be renamed over, or the
    // rename would fail only after the whole run: an output replaces regular files alone.
    if (fs::exists(st) && !fs::is_regular_file(st) && !fs::is_symlink(st)) {
      return InvalidArgument(at.string() + ": is not a regular file (an output file goes there)");
    }
    for (const std::string& input : inputs) {
      std::error_code same_ec;  // set, and false, when either does not exist
      if (fs::equivalent(input, at, same_ec) && !same_ec) {
        return InvalidArgument(at.string() + ": is " + input +
                               ", an input of this command; writing it would replace it");
      }
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<OutputDir>> OutputDir::Open(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return InvalidArgument(dir + ": cannot create output folder: " + ec.message());
  }
  fs::path normal = fs::absolute(dir, ec).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  RemoveStaleStaging(normal);
  static std::atomic<uint64_t> serial{0};
  const fs::path staging = StagingPath(normal, static_cast<long>(::getpid()), serial++);
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) return Internal(staging.string() + ": cannot create staging folder: " + ec.message());
  return std::unique_ptr<OutputDir>(new OutputDir(dir, staging.string()));
}

OutputDir::~OutputDir() {
  for (auto& e : entries_) e.stream.reset();
  std::error_code ec;
  fs::remove_all(staging_, ec);  // empty after a commit; the uncommitted files otherwise
}

StatusOr<std::ostream*> OutputDir::Stream(const std::string& name) {
  const fs::path where = fs::path(dir_) / name;
  auto refused = [&](const char* why) { return InvalidArgument(where.string().append(why)); };
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return refused(": not a file name in its output folder");
  }
  for (const Entry& staged : entries_) {
    if (staged.name == name) return refused(": two outputs of one run by that name");
  }
  SERVELAB_RETURN_IF_ERROR(CheckOutputPlaces(dir_, {name}));
  Entry e;
  e.name = name;
  e.temp_path = (fs::path(staging_) / name).string();
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
  // Nothing renamed unless every one can be: a folder made where a file goes since Stream.
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.name);
  SERVELAB_RETURN_IF_ERROR(CheckOutputPlaces(dir_, names));
  for (auto& e : entries_) {
    std::error_code ec;
    fs::rename(e.temp_path, fs::path(dir_) / e.name, ec);
    if (ec) return Internal((fs::path(dir_) / e.name).string() + ": " + ec.message());
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace servelab
