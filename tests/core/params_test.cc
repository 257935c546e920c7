// ParamReader::Where: the place errors name for a key, given or defaulted.
#include "core/params.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(ParamReaderTest, WhereIsTheGivenKeysLineElseTheExtensions) {
  const NamedParams named{"calibrated", {Param{"path", "m.yaml", "exp.yaml:7"}}, "cost_model",
                          "exp.yaml:5", ""};
  const ParamReader params(named);
  EXPECT_EQ(params.Where("path"), "exp.yaml:7: cost_model.path");
  EXPECT_EQ(params.Where("split_kv_length"), "exp.yaml:5: cost_model.split_kv_length");
  const NamedParams bare{"calibrated", {}, "cost_model", "", ""};
  EXPECT_EQ(ParamReader(bare).Where("path"), "cost_model.path");
}

}  // namespace
}  // namespace servelab
