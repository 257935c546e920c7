// RunPlotScript: one interpreter checks matplotlib and pandas and runs the script as
// `python3 SCRIPT ARGS...` would; a missing library is a skip, a failing script a note.
#include "cli/plot_script.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace servelab {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDebianPython = "/usr/bin/python3";

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& path, const std::string& text, bool executable = false) {
  std::ofstream(path) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

bool DebianPythonPlots() {
  return ::access(kDebianPython, X_OK) == 0 &&
         std::system("/usr/bin/python3 -c 'import matplotlib, pandas' 2>/dev/null") == 0;
}

class PlotScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("plot_script_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A script that imports a module beside it and writes what it was given.
    Write(dir_ / "beside.py", "WORD = 'beside'\n");
    Write(dir_ / "probe.py",
          "import os, sys\n"
          "import beside\n"
          "if __name__ == '__main__':\n"
          "    with open(sys.argv[1], 'w') as f:\n"
          "        f.write(beside.WORD + '|' + os.path.basename(sys.argv[0]) + '|' +\n"
          "                ','.join(sys.argv[1:]) + '|' + str('' in sys.path))\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs probe.py with `python`; stderr into *err.
  bool RunProbe(const std::string& python, std::string* err) {
    ::testing::internal::CaptureStderr();
    const bool ran = RunPlotScript("test", "probe.py", {(dir_ / "out.txt").string(), "--flag"},
                                   python, dir_.string());
    *err = ::testing::internal::GetCapturedStderr();
    return ran;
  }

  fs::path dir_;
};

TEST_F(PlotScriptTest, RunsTheScriptAsItsOwnMainWithItsFolderOnThePathAndItsArguments) {
  if (!DebianPythonPlots()) GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib or pandas";
  std::string err;
  ASSERT_TRUE(RunProbe(kDebianPython, &err)) << err;
  // Its sibling imported, argv[0] the script, the arguments in order, and -c's working
  // directory ('') not on the path, as under `python3 probe.py`.
  EXPECT_EQ(Read(dir_ / "out.txt"), "beside|probe.py|" + (dir_ / "out.txt").string() + ",--flag|False");
  EXPECT_EQ(err, "");
}

TEST_F(PlotScriptTest, WithoutMatplotlibItSkipsAndNeverRunsTheScript) {
  if (::access(kDebianPython, X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  // The same interpreter without its site packages (-S) and environment (-E): matplotlib
  // and pandas do not import.
  const fs::path bare = dir_ / "python-bare";
  Write(bare, "#!/bin/sh\nexec /usr/bin/python3 -S -E \"$@\"\n", /*executable=*/true);
  std::string err;
  EXPECT_FALSE(RunProbe(bare.string(), &err));
  EXPECT_NE(err.find("servelab test: note: plots skipped: " + bare.string() +
                     " lacks matplotlib or pandas"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "out.txt"));
}

TEST_F(PlotScriptTest, AFailingScriptIsNotedWithItsExitStatus) {
  const fs::path failing = dir_ / "python-failing";
  Write(failing, "#!/bin/sh\nexit 3\n", /*executable=*/true);
  std::string err;
  EXPECT_FALSE(RunProbe(failing.string(), &err));
  EXPECT_NE(err.find("servelab test: note: plotting failed (probe.py exit 3); the results are complete"),
            std::string::npos) << err;
}

TEST_F(PlotScriptTest, AMissingInterpreterOrScriptIsASkip) {
  std::string err;
  EXPECT_FALSE(RunProbe((dir_ / "no-python").string(), &err));
  EXPECT_NE(err.find("plots skipped: " + (dir_ / "no-python").string() + " is missing"),
            std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(RunPlotScript("test", "absent.py", {}, kDebianPython, dir_.string()));
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("plots skipped: the plot script is not in the source tree"), std::string::npos)
      << err;
}

// The project's own script through the real entry point: calibrate's figure drawn from a
// small calibration_points.csv (servelab_plots imported from plots/).
TEST_F(PlotScriptTest, DrawsTheCalibrationFigure) {
  if (!DebianPythonPlots()) GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib or pandas";
  std::string csv = "kind,file,op,tokens,batch,context,tp,measured_ms,predicted_ms\n";
  for (int tokens = 16; tokens <= 1024; tokens *= 2) {
    csv += "fit,p.csv,mlp_up_proj," + std::to_string(tokens) + ",1,0,1," +
           std::to_string(0.01 + tokens * 1e-4) + "," + std::to_string(0.011 + tokens * 1e-4) + "\n";
  }
  Write(dir_ / "calibration_points.csv", csv);
  const fs::path png = dir_ / "calibration.png";
  ::testing::internal::CaptureStderr();
  const bool ran = RunPlotScript("test", "calibration.py",
                                 {(dir_ / "calibration_points.csv").string(), "--out", png.string()});
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(ran) << err;
  ASSERT_TRUE(fs::is_regular_file(png));
  EXPECT_EQ(Read(png).substr(1, 3), "PNG");
}

}  // namespace
}  // namespace servelab
