#pragma once
// MODEL.yaml, a calibrated model as a file: `servelab calibrate` writes it, the calibrated
// cost model (and `calibrate --evaluate`'s readers) read it back.
#include <map>
#include <string>

#include "core/status.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"

namespace servelab {

// MODEL.yaml: every fitted op's coefficients and what they were fitted from. The text is
// deterministic; ReadCalibratedModel reads it back (errors name file, line and key). An
// efficiency of .inf makes its term free (a hand-written model of what costs nothing).
std::string CalibratedModelYaml(const CalibratedModel& model,
                                const std::map<std::string, ErrorStats>& in_sample);
StatusOr<CalibratedModel> ReadCalibratedModel(const std::string& path);

}  // namespace servelab
