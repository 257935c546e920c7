#pragma once
// MODEL.yaml, a calibrated model as a file: `servelab calibrate` writes it, the calibrated
// cost model (and `calibrate --evaluate`'s readers) read it back.
#include <map>
#include <string>

#include "core/status.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"

namespace servelab {

// The first line of a MODEL.yaml `servelab calibrate` wrote. Such a file ends with
// `complete: true`; one that starts with this line and lacks it was cut short, and is
// refused (a hand-written model, without this line, needs no end).
inline constexpr char kCalibratedModelHeader[] =
    "# servelab calibrated cost model, written by `servelab calibrate`.\n";

// MODEL.yaml: every fitted op's coefficients and what they were fitted from. The text is
// deterministic; ReadCalibratedModel reads it back (errors name file, line and key). An
// efficiency of .inf makes its term free (a hand-written model of what costs nothing).
std::string CalibratedModelYaml(const CalibratedModel& model,
                                const std::map<std::string, ErrorStats>& in_sample);
StatusOr<CalibratedModel> ReadCalibratedModel(const std::string& path);

}  // namespace servelab
