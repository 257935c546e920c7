// A profile CSV (servelab's own layout or Vidur's), read as a file named for no GPU and
// as one of an A100 (Vidur's files name their GPU only in the file name: without it the
// reader stops at the header), then, when it reads, fitted and evaluated: a profile that
// reads is either fitted or refused as bad input (too few points or sizes), never a crash,
// and a fitted model's file reads back.
#include <cstdint>
#include <fstream>

#include "driver/profile_table.h"
#include "fuzz/fuzz_util.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  const std::string path = fuzz::WriteInput(".csv", data, size);
  for (const char* device : {"", "a100-80gb"}) {
    auto table = ReadProfile(path, device);
    if (!table.ok()) {
      if (!table.status().IsBadInput()) {
        fuzz::Broken("a profile error that is not bad input", table.status().message());
      }
      continue;
    }
    auto model = FitProfiles({*table});
    if (!model.ok()) {
      if (!model.status().IsBadInput()) {
        fuzz::Broken("a fit error that is not bad input", model.status().message());
      }
      continue;
    }
    auto evaluation = Evaluate(*model, *table);
    if (!evaluation.ok() && !evaluation.status().IsBadInput()) {
      fuzz::Broken("an evaluation error that is not bad input", evaluation.status().message());
    }
    const std::string model_path = path + ".model.yaml";
    std::ofstream(model_path, std::ios::trunc) << CalibratedModelYaml(*model, {});
    auto back = ReadCalibratedModel(model_path);
    if (!back.ok()) fuzz::Broken("a fitted model's file does not read back", back.status().message());
  }
  return 0;
}
