#include "core/read_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace servelab {
namespace {

namespace fs = std::filesystem;

class ReadFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("servelab_read_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ReadFileTest, ReadsARegularFileWhole) {
  const fs::path p = dir_ / "a.txt";
  std::ofstream(p, std::ios::binary) << std::string("x\0y\n", 4);
  const auto text = ReadRegularFile(p.string(), 100, "thing");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, std::string("x\0y\n", 4));
}

TEST_F(ReadFileTest, OverTheLimitIsAnErrorBeforeReading) {
  const fs::path p = dir_ / "big.txt";
  std::ofstream(p, std::ios::binary) << std::string(101, 'z');
  const auto text = ReadRegularFile(p.string(), 100, "trace");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find(p.string() + ": the trace is 101 bytes, over the 100 bytes limit"),
            std::string::npos)
      << text.status().message();
  EXPECT_TRUE(ReadRegularFile(p.string(), 101, "trace").ok());
}

// Reading /dev/zero would never end and a FIFO would block: both are refused at once,
// through a symlink too; a directory and a missing file are named.
TEST_F(ReadFileTest, OnlyRegularFilesAreRead) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path link = dir_ / "zero.csv";
  fs::create_symlink("/dev/zero", link);
  for (const fs::path& p : {fifo, link, fs::path("/dev/zero"), dir_}) {
    const auto text = ReadRegularFile(p.string(), 1 << 20, "experiment file");
    ASSERT_FALSE(text.ok()) << p;
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument) << p;
    EXPECT_NE(text.status().message().find(p.string() + ": the experiment file is not a regular file"),
              std::string::npos)
        << text.status().message();
  }
  const auto missing = ReadRegularFile((dir_ / "none").string(), 10, "model config");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot open the model config"), std::string::npos);
}

}  // namespace
}  // namespace servelab
