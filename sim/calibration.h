#pragma once
// Fitting per-op time models (sim/op_model.h) to measured profiles, and measuring how
// well a fit predicts a profile.
//
// Each op is fitted on its own, in its physical form (a fixed per-kernel cost plus
// memory and compute terms, or memory alone for stream ops), minimising the squared
// RELATIVE error (rows weighted by 1 / measured time). The max() of the roofline form
// splits the rows into memory- and compute-bound ones; the fit alternates between
// assigning each row to the term that dominates it and solving the weighted linear least
// squares problem that assignment gives (Eigen), until the assignment holds, starting
// from the datasheet roofline. Coefficients stay >= 0. A term no row is bound by cannot
// be identified: it keeps the roofline's default efficiency, and the model says so.
//
// Coefficients are kept as the fixed cost and efficiencies against the device's peaks,
// so a fit carries to another GPU (its peaks) and to other shapes and TP degrees (the
// work formulas): what transfers is exactly what the form assumes.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "driver/gpu_spec.h"
#include "sim/op_model.h"
#include "driver/profile_table.h"

namespace servelab {

// The datasheet roofline's efficiencies (RooflineOptions' defaults), for terms a fit
// cannot identify and ops a profile does not cover.
struct RooflineDefaults {
  double gemm_efficiency = 0.75;
  double attention_efficiency = 0.5;
  double memory_efficiency = 0.85;
  double interconnect_efficiency = 0.8;
  double allreduce_latency_us = 10.0;
};

struct OpFit {
  Op op = Op::kQkvProj;
  double fixed_us = 0;
  double memory_efficiency = 0;   // of the peak bandwidth (the link's, for allreduce)
  double compute_efficiency = 0;  // of the tensor peak; roofline-form ops only
  double causal_efficiency = 0;   // prefill attention: its causal FLOPs' rate
  double per_row_us = 0;          // prefill attention: per query token
  bool memory_fitted = false;     // false: no row was memory-bound, the default was kept
  bool compute_fitted = false;
  int64_t points = 0;
  // The coefficients on `gpu` for `shape`'s dtypes.
  OpCoefficients On(const GpuSpec& gpu, const OpShape& shape) const;
};

struct CalibratedModel {
  std::string device;  // the GPU the profiles were measured on
  std::vector<std::string> fitted_from;
  std::map<Op, OpFit> ops;
  bool has_step_overhead = false;
  double step_overhead_us = 0;  // a whole step beyond its ops, from "step" rows
};

struct FitOptions {
  RooflineDefaults defaults;
  int32_t min_points_per_coefficient = 4;
  int32_t min_distinct_sizes = 3;
};

// Fits every op the tables measure. All rows must come from one device (a catalog GPU or
// "cpu"). InvalidArgument naming the op when it has too few rows or too few distinct
// sizes to fit its coefficients, instead of fitting noise.
StatusOr<CalibratedModel> FitProfiles(const std::vector<ProfileTable>& tables,
                                      const FitOptions& options = {});

// Relative errors in percent: mean of |predicted - measured| / measured, the largest one,
// and the mean signed error (bias; negative = predicted too low).
struct ErrorStats {
  int64_t points = 0;
  double mape = 0, max_error = 0, bias = 0;
};

struct PointPrediction {
  std::string op;
  int64_t tokens = 0, batch = 0, context = 0;
  int32_t tp = 1;
  double measured_ms = 0, predicted_ms = 0;
};

struct Evaluation {
  std::string file;
  std::string device;
  std::map<std::string, ErrorStats> ops;  // by op name
  // Per-layer totals: for each measured configuration (shape, tokens, batch, context,
  // tp), the sum of its per-layer ops, predicted against measured.
  ErrorStats total;
  std::map<int32_t, ErrorStats> total_by_tp;  // the same, per TP degree
  std::vector<std::string> not_modelled;  // ops in the file the model has no fit for
  std::vector<PointPrediction> points;
};

// Predicts every row of `table` whose op the model fits; rows measured as 0 are skipped.
// The file's device must be a catalog GPU or the model's own device.
StatusOr<Evaluation> Evaluate(const CalibratedModel& model, const ProfileTable& table);

// The GPU whose peaks the efficiencies of `device` refer to: a catalog GPU, or for "cpu"
// a nominal device of 1 GB/s and 1 GFLOP/s (CPU fits are kept in those units).
StatusOr<GpuSpec> DeviceSpec(const std::string& device);

// MODEL.yaml: every fitted op's coefficients and what they were fitted from. The text is
// deterministic; ReadCalibratedModel reads it back (errors name file, line and key). An
// efficiency of .inf makes its term free (a hand-written model of what costs nothing).
std::string CalibratedModelYaml(const CalibratedModel& model,
                                const std::map<std::string, ErrorStats>& in_sample);
StatusOr<CalibratedModel> ReadCalibratedModel(const std::string& path);

}  // namespace servelab
