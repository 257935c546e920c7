#pragma once
// What `servelab calibrate` writes and prints about a fit: calibration.json (the fitted
// coefficients, per file and per op: MAPE, worst error, bias), calibration_points.csv
// (every row measured and predicted) and the console's table and figures.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/calibration.h"
#include "sim/fit_evaluation.h"

namespace servelab {

// calibration.json: `model_path` (MODEL.yaml), the device, the fitted ops' coefficients, a
// mixture of experts' counted routing, and the in-sample, per-fitted-file and --evaluate
// evaluations.
nlohmann::ordered_json CalibrationJson(const std::string& model_path, const CalibratedModel& model,
                                       const Evaluation& in_sample, const std::vector<Evaluation>& fitted,
                                       const std::vector<Evaluation>& evaluations);

// calibration_points.csv, its header first: kind (fit or evaluate), file, op, tokens,
// batch, context, tp, measured_ms, predicted_ms, form_ms, leave_one_out_ms.
std::string CalibrationPointsCsv(const std::vector<Evaluation>& fitted,
                                 const std::vector<Evaluation>& evaluations);

// The per-op table, notes (few weight sizes, counted routing), each file's per-layer
// figures and the step overhead, on stdout.
void PrintCalibration(const CalibratedModel& model, const Evaluation& in_sample,
                      const std::vector<Evaluation>& fitted, const std::vector<Evaluation>& evaluations);

}  // namespace servelab
