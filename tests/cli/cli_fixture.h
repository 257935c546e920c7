#pragma once
// Running the `servelab` binary from tests: a per-test folder, the command's exit status,
// stdout and stderr, and small file helpers.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace servelab::testing {

struct CliResult {
  int exit_code;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every regular file under `dir` (hidden ones too), by relative path, with its bytes.
inline std::map<std::string, std::string> Tree(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      files[std::filesystem::relative(e.path(), dir).string()] = ReadFile(e.path());
    }
  }
  return files;
}

// The files that differ between two trees, by name (not their contents: gtest would diff
// megabytes of CSV line by line).
inline std::vector<std::string> Differences(const std::map<std::string, std::string>& a,
                                            const std::map<std::string, std::string>& b) {
  std::vector<std::string> names;
  for (const auto& [name, text] : a) {
    if (!b.count(name) || b.at(name) != text) names.push_back(name);
  }
  for (const auto& [name, text] : b) {
    if (!a.count(name)) names.push_back(name + " (only in the second)");
  }
  return names;
}

// A fresh folder per test (named after the suite, the test and the process, so parallel
// runs of the suite do not collide), removed afterwards; Run executes the binary in it.
class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("servelab_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `servelab <args>` with stdin closed; stdout and stderr captured in files of dir_.
  CliResult Run(const std::string& args) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    const std::string command =
        std::string(SERVELAB_BINARY) + " " + args + " >" + out + " 2>" + err + " </dev/null";
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out), ReadFile(err)};
  }
  std::filesystem::path Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  std::filesystem::path dir_;
};

}  // namespace servelab::testing
