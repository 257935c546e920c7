// A run into a result folder: every file lands only when the whole run succeeded, so a
// backend that fails part-way leaves an earlier result at the same path untouched.
#include "driver/result_folder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "driver/config_yaml.h"
#include "tests/driver/fakes.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::map<std::string, std::string> ReadFolder(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    files[entry.path().filename().string()] = text.str();
  }
  return files;
}

class ResultFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servelab_result_folder_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  StatusOr<RunSummary> Run(int64_t fail_at_step, int32_t blocks) {
    auto config = ParseExperiment(
        "name: t\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
        "workload: {num_requests: 20, arrival: {process: constant, rate: 50}}\n",
        "exp.yaml", "/", {"output.dir=" + dir_.string()});
    EXPECT_TRUE(config.ok()) << config.status().message();
    auto prepared = PrepareExperiment(*config);
    EXPECT_TRUE(prepared.ok()) << prepared.status().message();
    FakeBackendOptions options;
    options.fail_at_step = fail_at_step;
    options.capacity.num_gpu_blocks = blocks;
    BackendFactory backends = [options](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(std::make_unique<FakeBackend>(options));
    };
    return RunToFolder(*prepared, backends, /*progress=*/false);
  }

  fs::path dir_;
};

TEST_F(ResultFolderTest, AFailedRunLeavesTheEarlierResultUntouched) {
  auto good = Run(/*fail_at_step=*/-1, /*blocks=*/777);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->num_finished, 20);
  const auto before = ReadFolder(dir_);
  ASSERT_EQ(before.count("requests.csv"), 1u);
  ASSERT_EQ(before.count("summary.json"), 1u);
  // The header reports the pool the backend held, not a formula's.
  EXPECT_THAT(before.at("summary.json"), HasSubstr("\"kv_blocks_per_replica\": 777,"));
  EXPECT_THAT(before.at("summary.json"), HasSubstr("\"max_model_len\": 2048,"));

  auto failed = Run(/*fail_at_step=*/5, /*blocks=*/555);
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(failed.status().IsBadInput()) << "a runtime failure: the CLI exits 1";
  EXPECT_THAT(failed.status().message(), HasSubstr("replica 0, step 5 (t = "));
  EXPECT_THAT(failed.status().message(), HasSubstr("fake: device fault"));
  EXPECT_EQ(ReadFolder(dir_), before) << "same files, same bytes, no temporaries left";
}

}  // namespace
}  // namespace servelab
