#pragma once
// A result folder written atomically per file: every output goes to a hidden temporary
// file first and is renamed into place only when the whole run succeeded, so a failed
// or interrupted run never leaves a half-written file over a previous good result.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace servelab {

class OutputDir {
 public:
  // Creates `dir` (and parents) if needed.
  static StatusOr<std::unique_ptr<OutputDir>> Open(const std::string& dir);
  ~OutputDir();  // removes temporaries not committed

  // A stream for `name` (e.g. "requests.csv"), written to a temporary until Commit.
  StatusOr<std::ostream*> Stream(const std::string& name);
  Status WriteFile(const std::string& name, const std::string& contents);
  // Flushes, checks every stream, and renames all temporaries into place.
  Status Commit();
  const std::string& Dir() const { return dir_; }

 private:
  explicit OutputDir(std::string dir) : dir_(std::move(dir)) {}
  struct Entry {
    std::string name;
    std::string temp_path;
    std::unique_ptr<std::ofstream> stream;
  };
  std::string dir_;
  std::vector<Entry> entries_;
  bool committed_ = false;
};

}  // namespace servelab
