// A calibrated cost model file (MODEL.yaml, `cost_model: {type: calibrated, path: ...}`):
// read, or refused as bad input; an accepted one, written back (CalibratedModelYaml), reads
// to the same text; and a cost model made from it on an A100 deployment of a dense model
// of a mixture of experts (Mixtral, TP 2 with its experts over both GPUs) and of a dense
// model over four nodes (TP 16 x PP 2 on 8-GPU nodes: all-reduces and a stage transfer on
// the network), or refused as bad input, times a prefill chunk, a decode batch and a mixed
// step without a crash, its pipeline stages summing to the step.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/step_plan.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "fuzz/fuzz_util.h"
#include "sim/calibration.h"
#include "sim/model_file.h"
#include "sim/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servelab;
  const std::string path = fuzz::WriteInput("_model.yaml", data, size);
  auto model = ReadCalibratedModel(path);
  if (!model.ok()) {
    std::filesystem::remove(path);
    if (!model.status().IsBadInput()) {
      fuzz::Broken("a model file error that is not bad input", model.status().message());
    }
    return 0;
  }
  // What servelab writes for a model it accepted reads back to the same text.
  const std::string written = CalibratedModelYaml(*model, {});
  std::ofstream(path, std::ios::trunc) << written;
  auto again = ReadCalibratedModel(path);
  if (!again.ok()) fuzz::Broken("a written model file does not read", again.status().message());
  if (CalibratedModelYaml(*again, {}) != written) {
    fuzz::Broken("a written model file changes", written);
  }

  DeploymentSpec dense, moe, nodes;
  dense.model = *FindModel("llama-2-7b");
  dense.gpu = *FindGpu("a100-80gb");
  moe = dense;
  moe.model = *FindModel("mixtral-8x7b");
  moe.tensor_parallel = moe.expert_parallel = 2;
  nodes = dense;
  nodes.tensor_parallel = 16;
  nodes.pipeline_parallel = 2;
  const NamedParams named{"calibrated", {Param{"path", path, "fuzz.yaml:1"}}, "cost_model",
                          "fuzz.yaml:1", "/"};
  std::vector<std::unique_ptr<CostModel>> costs;
  for (const DeploymentSpec& d : {dense, moe, nodes}) {
    auto cost = BuiltinCostModels().Make(named, d);
    if (!cost.ok()) {
      if (!cost.status().IsBadInput()) {
        fuzz::Broken("a cost model error that is not bad input", cost.status().message());
      }
      continue;
    }
    costs.push_back(std::move(*cost));
  }
  std::filesystem::remove(path);
  std::vector<Request> requests(3);
  for (Request& r : requests) {
    r.prompt_len = 2000;
    r.target_output_len = 10;
  }
  StepPlan prefill, decode, mixed;
  prefill.seqs.push_back(ScheduledRequest{&requests[0], 512, 1000, false, false});
  prefill.num_prefill_tokens = 512;
  for (int i = 0; i < 2; ++i) {
    Request* r = &requests[static_cast<size_t>(i) + 1];
    decode.seqs.push_back(ScheduledRequest{r, 1, 1999, true, false});
  }
  decode.num_decode_tokens = decode.num_emitting = 2;
  decode.steps_since_prefill = 1;  // a model's after_prefill applies
  mixed.seqs = decode.seqs;
  mixed.seqs.push_back(prefill.seqs[0]);
  mixed.num_prefill_tokens = 512;
  mixed.num_decode_tokens = mixed.num_emitting = 2;
  for (const auto& cost : costs) {
    for (const StepPlan* plan : {&prefill, &decode, &mixed}) {
      const TimeNs step = cost->StepTime(*plan);
      if (step < 0) fuzz::Broken("a negative step time", written);
      std::vector<TimeNs> stages(2);
      cost->StageTimes(*plan, stages);
      if (stages[0] < 0 || stages[1] < 0 || stages[0] + stages[1] != step) {
        fuzz::Broken("pipeline stages that do not sum to the step", written);
      }
    }
  }
  return 0;
}
