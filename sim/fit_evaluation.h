#pragma once
// How well a calibrated model (sim/calibration.h) predicts a profile: each row's op, whole
// steps and per-layer totals, by the model as it predicts (its GEMM corrections included),
// by the fitted form alone, and leave-one-out; MAPE, worst error and bias per op, per TP
// degree and per file (`servelab calibrate`'s figures).
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "driver/gpu_spec.h"
#include "driver/profile_table.h"
#include "sim/calibration.h"

namespace servelab {

// How a prediction takes the model's GEMM corrections: not at all (the form alone), as
// the model has them, or each row's correction from the other rows measured at its
// shape (GemmCorrection::LeaveOneOut: the correction's error on rows it did not see).
// They apply only on the model's own device.
enum class GemmCorrectionUse { kNone, kApplied, kLeaveOneOut };

// One profile row's op as the model predicts it, in seconds. REQUIRES: the model fits op.
double PredictRow(const CalibratedModel& model, const GpuSpec& gpu, Op op, const ProfileRow& row,
                  GemmCorrectionUse use = GemmCorrectionUse::kApplied);

// The CUDA graph a "step" row's decode ran as, on a model fitted with decode graphs
// (CalibratedModel::decode_graphs): the graph the row records (graph_rows and
// graph_context), or, on a row that does not say, of servelab's own CUDA kernels
// (ServelabGpuKernels), the one kernels/decode_graph_shape.h gives for its batch and
// context without the runner's caps (its max_num_seqs and context served, which such a
// profile does not record: a batch of 100 under max_num_seqs 100 ran 100 rows, and is
// then priced as 104). None: a row run op by op, or not a decode step.
struct StepGraph {
  int64_t rows = 0;
  int64_t context_bucket = 0;
};
std::optional<StepGraph> StepGraphOf(const CalibratedModel& model, const GpuSpec& gpu, const ProfileRow& row);

// A "step" row's ops as the model predicts them, in seconds (without the step
// overhead): the configuration is a decode when tokens == batch, else one prefill chunk;
// a decode run as a CUDA graph (StepGraphOf), every op over the graph's rows and decode
// attention over its context bucket's partitions.
double PredictOps(const CalibratedModel& model, const GpuSpec& gpu, const ProfileRow& row);

// Relative errors in percent: mean of |predicted - measured| / measured, the largest one,
// and the mean signed error (bias; negative = predicted too low).
struct ErrorStats {
  int64_t points = 0;
  double mape = 0, max_error = 0, bias = 0;
  // Of relative errors (predicted - measured) / measured, as fractions.
  static ErrorStats Of(std::span<const double> relative_errors);
};

struct PointPrediction {
  std::string op;
  int64_t tokens = 0, batch = 0, context = 0;
  int32_t tp = 1;
  double measured_ms = 0, predicted_ms = 0;
  // The fitted form alone, and with the row's GEMM correction from its shape's other rows
  // (GemmCorrectionUse); predicted_ms where no correction applies.
  double form_ms = 0, leave_one_out_ms = 0;
};

struct Evaluation {
  std::string file;
  std::string device;
  std::map<std::string, ErrorStats> ops;  // by op name
  // Per-layer totals: for each measured configuration (shape, tokens, batch, context,
  // tp), the sum of its per-layer ops, predicted against measured.
  ErrorStats total;
  std::map<int32_t, ErrorStats> total_by_tp;  // the same, per TP degree
  // The same by the form alone (no GEMM corrections), and with each GEMM row corrected
  // from its shape's other rows (GemmCorrectionUse::kLeaveOneOut); all three equal when
  // no correction applies.
  ErrorStats total_form, total_leave_one_out;
  std::map<int32_t, ErrorStats> total_form_by_tp, total_leave_one_out_by_tp;
  std::map<std::string, ErrorStats> ops_form;  // by op name, the form alone
  std::map<std::string, ErrorStats> ops_leave_one_out;  // by op name, leave-one-out
  bool corrected = false;  // a GEMM correction applied to some row
  // The GEMM weight shapes (op, K, N) the file measured, and those a correction applied to.
  int64_t gemm_shapes = 0, corrected_gemm_shapes = 0;
  // Whole steps ("step" rows with `layers`): PredictOps plus the model's step overhead.
  ErrorStats step;
  std::vector<std::string> not_modelled;  // ops in the file the model has no fit for
  std::vector<PointPrediction> points;
};

// Predicts every row of `table` whose op the model fits; rows measured as 0 are skipped.
// The file's device must be a catalog GPU or the model's own device.
StatusOr<Evaluation> Evaluate(const CalibratedModel& model, const ProfileTable& table);

}  // namespace servelab
