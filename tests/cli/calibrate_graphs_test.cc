// `servelab calibrate` on a profile that records the CUDA graph each decode step ran as
// (graph_rows, graph_context): the H200's run 4 profile (Llama-3-8B, whose decode steps ran
// as graphs; written before the columns existed) with each decode step's graph filled in
// as its runner would have picked it (batches of at most 128 and contexts of at most 4,096
// stay under the runner's caps, so the uncapped rule is its rule). Recorded or assumed,
// the fit is the same, byte for byte; calibrate says what it was fitted from.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>

#include "driver/profile_table.h"
#include "kernels/decode_graph_shape.h"
#include "tests/cli/cli_fixture.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliResult;
using testing::ReadFile;

class CalibrateGraphsTest : public testing::CliFixture {};

TEST_F(CalibrateGraphsTest, RecordedGraphsFitAsTheAssumedOnes) {
  const fs::path source(SERVELAB_SOURCE_DIR);
  const fs::path profile = source / "experiments" / "results" / "h200" / "run4" / "calibration" / "profile_cuda.csv";
  auto table = ReadProfile(profile.string());
  ASSERT_TRUE(table.ok()) << table.status().message();
  std::ostringstream recorded;
  recorded << ProfileCsvHeader();
  int64_t graphs = 0, padded = 0;
  for (ProfileRow r : table->rows) {
    ASSERT_FALSE(r.GraphRecorded());
    r.graph_rows = r.graph_context = 0;
    if (r.op == "step" && r.tokens == r.batch) {
      ASSERT_LE(r.batch, 128);
      ASSERT_LT(r.context, 4096);
      r.graph_rows = kernels::DecodeGraphBatch(static_cast<int32_t>(r.batch), 0);
      r.graph_context = kernels::DecodeGraphContextBucket(static_cast<int32_t>(r.context + 1), 0);
      ++graphs;
      if (r.graph_rows > r.batch) ++padded;
    }
    WriteProfileRow(recorded, r);
  }
  ASSERT_GT(padded, 0);
  const fs::path with_graphs = Write("profile_graphs.csv", recorded.str());
  const CliResult assumed = Run("calibrate " + profile.string() + " --out " + (dir_ / "a" / "MODEL.yaml").string() +
                                " --no-plots");
  ASSERT_EQ(assumed.exit_code, 0) << assumed.err;
  EXPECT_THAT(assumed.err, HasSubstr("does not record how its decode steps ran"));
  const CliResult fitted = Run("calibrate " + with_graphs.string() + " --out " + (dir_ / "r" / "MODEL.yaml").string() +
                               " --no-plots");
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  EXPECT_THAT(fitted.err, Not(HasSubstr("does not record")));
  EXPECT_THAT(fitted.out, HasSubstr("as recorded: " + std::to_string(graphs) + " ran as CUDA graphs (" +
                                    std::to_string(padded) + " padded to the graph's rows), 0 op by op"));
  // The same model but for the file it names.
  std::string a = ReadFile(dir_ / "a" / "MODEL.yaml"), r = ReadFile(dir_ / "r" / "MODEL.yaml");
  a.replace(a.find(profile.string()), profile.string().size(), "PROFILE");
  r.replace(r.find(with_graphs.string()), with_graphs.string().size(), "PROFILE");
  EXPECT_EQ(a, r);
}

}  // namespace
}  // namespace servelab
