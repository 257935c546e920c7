#pragma once
// A result folder written atomically per file: every output goes to a staging folder
// beside it first (".NAME.staging.PID.N", one per OutputDir: several may be open on one
// folder; same filesystem) and is renamed into place only when the whole run succeeded,
// so a failed, interrupted or killed run leaves the result folder as it was, hidden
// files included. A later Open removes the staging folders of runs whose process is gone.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace servelab {

// Whether `dir` and the files `files` in it can be written, creating nothing: the nearest
// existing one of `dir` and its parents is a folder, no file's place is a folder, a
// device, a FIFO or a socket (only a regular file, or a link, is replaced), and none is
// the very file of one of `inputs` (links and other names of it included: committing it
// would replace what the command read, `calibrate p.csv --out p.csv`). InvalidArgument
// naming the place otherwise; for commands that check before long work what OutputDir
// would find only after it.
Status CheckOutputPlaces(const std::string& dir, const std::vector<std::string>& files,
                         const std::vector<std::string>& inputs = {});

class OutputDir {
 public:
  // Creates `dir` (and parents) if needed.
  static StatusOr<std::unique_ptr<OutputDir>> Open(const std::string& dir);
  ~OutputDir();  // removes temporaries not committed

  // A stream for `name` (e.g. "requests.csv"), written to a temporary until Commit.
  // InvalidArgument when `name` is not a plain file name (empty, "..", with a '/'), is
  // already staged, or names a folder in the folder: said before any work is spent on its
  // contents.
  StatusOr<std::ostream*> Stream(const std::string& name);
  Status WriteFile(const std::string& name, const std::string& contents);
  // Flushes, checks every stream, and renames all temporaries into place; none when one
  // of them would land on a folder.
  Status Commit();
  const std::string& Dir() const { return dir_; }

 private:
  OutputDir(std::string dir, std::string staging)
      : dir_(std::move(dir)), staging_(std::move(staging)) {}
  struct Entry {
    std::string name;
    std::string temp_path;
    std::unique_ptr<std::ofstream> stream;
  };
  std::string dir_;
  std::string staging_;
  std::vector<Entry> entries_;
  bool committed_ = false;
};

}  // namespace servelab
