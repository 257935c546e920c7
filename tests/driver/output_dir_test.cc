#include "driver/output_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace servelab {
namespace {

namespace fs = std::filesystem;

// Every file under `dir`, hidden ones included, with its bytes.
std::map<std::string, std::string> Tree(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    files[fs::relative(e.path(), dir).string()] = text.str();
  }
  return files;
}

// A child process that opens `dir`, writes half a file and exits as if killed (no
// destructor, no commit): its staging folder stays behind. Returns its pid (not reaped).
pid_t StageHalfAFileAndDie(const fs::path& dir) {
  const pid_t child = ::fork();
  if (child == 0) {
    auto out = OutputDir::Open(dir.string());
    if (out.ok()) {
      auto stream = (*out)->Stream("requests.csv");
      if (stream.ok()) **stream << "half a file" << std::flush;
    }
    ::_exit(0);
  }
  return child;
}

class OutputDirTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("servelab_output_dir_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = root_ / "run";
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_, dir_;
};

TEST_F(OutputDirTest, FilesAppearOnlyAtCommit) {
  auto out = OutputDir::Open(dir_.string());
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->WriteFile("a.csv", "1\n").ok());
  EXPECT_TRUE(Tree(dir_).empty());
  ASSERT_TRUE((*out)->Commit().ok());
  EXPECT_EQ(Tree(dir_), (std::map<std::string, std::string>{{"a.csv", "1\n"}}));
  out->reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1)
      << "no staging folder left";
}

// Two OutputDirs open on one folder at once (a command writing two files there, each
// committed on its own) stage apart: neither's Open removes what the other staged.
TEST_F(OutputDirTest, TwoOpenOnOneFolderStageApart) {
  auto first = OutputDir::Open(dir_.string());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->WriteFile("a.csv", "a\n").ok());
  auto second = OutputDir::Open(dir_.string());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->WriteFile("b.csv", "b\n").ok());
  ASSERT_TRUE((*first)->Commit().ok());
  ASSERT_TRUE((*second)->Commit().ok());
  EXPECT_EQ(Tree(dir_), (std::map<std::string, std::string>{{"a.csv", "a\n"}, {"b.csv", "b\n"}}));
  first->reset();
  second->reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1)
      << "no staging folder left";
}

// A name that is no plain file name, one staged twice, or one where a folder stands is
// refused when its stream is asked for; a folder made there later stops the commit before
// any file is renamed, so the earlier result stays whole.
TEST_F(OutputDirTest, NamesThatCannotBeWrittenAreRefusedUpFront) {
  auto out = OutputDir::Open(dir_.string());
  ASSERT_TRUE(out.ok());
  for (const std::string bad : {"", ".", "..", "sub/a.csv"}) {
    auto s = (*out)->Stream(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(s.status().IsBadInput()) << bad;
    EXPECT_NE(s.status().message().find("not a file name"), std::string::npos) << s.status().message();
  }
  ASSERT_TRUE((*out)->WriteFile("a.csv", "new\n").ok());
  auto twice = (*out)->Stream("a.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("two outputs of one run"), std::string::npos);
  fs::create_directories(dir_ / "folder");
  auto folder = (*out)->Stream("folder");
  ASSERT_FALSE(folder.ok());
  EXPECT_TRUE(folder.status().IsBadInput());
  EXPECT_NE(folder.status().message().find("is a folder"), std::string::npos);

  // Committed once: a.csv holds "old". Then a run stages a.csv and b.csv, and b.csv
  // becomes a folder before its commit: neither file is renamed.
  {
    std::ofstream(dir_ / "a.csv") << "old";
  }
  ASSERT_TRUE((*out)->WriteFile("b.csv", "b").ok());
  fs::create_directories(dir_ / "b.csv");
  const Status commit = (*out)->Commit();
  ASSERT_FALSE(commit.ok());
  EXPECT_NE(commit.message().find("b.csv: is a folder"), std::string::npos) << commit.message();
  std::ifstream in(dir_ / "a.csv");
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "old");
}

// A run killed mid-way (no destructor runs) leaves the earlier result byte-identical,
// hidden files included; the next Open removes what the dead process staged.
TEST_F(OutputDirTest, AKilledRunLeavesTheEarlierResultAsItWas) {
  {
    auto out = OutputDir::Open(dir_.string());
    ASSERT_TRUE((*out)->WriteFile("requests.csv", "old\n").ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  const auto before = Tree(dir_);
  const pid_t child = StageHalfAFileAndDie(dir_);
  ASSERT_GE(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(Tree(dir_), before);
  bool staged = false;
  for (const auto& e : fs::directory_iterator(root_)) staged |= e.path() != dir_;
  EXPECT_TRUE(staged) << "the killed run's staging folder is beside the result";
  // An old-style leftover inside the folder, from a process long gone.
  std::ofstream(dir_ / ".requests.csv.tmp.999999999") << "x";
  auto next = OutputDir::Open(dir_.string());
  ASSERT_TRUE(next.ok());
  next->reset();
  EXPECT_EQ(Tree(dir_), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

// A run killed while its parent does not reap it (a container's init often never does)
// stays a zombie: it still has its pid, but its staging folder is a leftover all the same.
TEST_F(OutputDirTest, AZombiesStagingFolderIsALeftover) {
  const pid_t child = StageHalfAFileAndDie(dir_);
  ASSERT_GE(child, 0);
  // Not reaped yet: wait until it is a zombie (state Z in /proc/<pid>/stat).
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 2)
      << "the result folder and the zombie's staging folder";
  auto next = OutputDir::Open(dir_.string());
  ASSERT_TRUE(next.ok());
  next->reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1)
      << "and a later Open removes it (only the result folder is left)";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
}

}  // namespace
}  // namespace servelab
