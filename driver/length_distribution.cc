#include "driver/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "driver/trace_reader.h"

namespace servelab {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxZipfValues = int64_t{1} << 24;

std::string Key(std::string_view key, std::string_view field) {
  return std::string(key) + "." + std::string(field);
}

Status Bad(std::string_view key, std::string_view field, const std::string& what) {
  return InvalidArgument(Key(key, field) + ": " + what);
}

Status Validate(const LengthDistConfig& c, std::string_view key) {
  const auto num = [](double x) { return std::to_string(x); };
  if (c.min < 1) return Bad(key, "min", "must be >= 1, got " + std::to_string(c.min));
  if (c.max < 0) return Bad(key, "max", "must be >= 0, got " + std::to_string(c.max));
  switch (c.dist) {
    case LengthDist::kFixed:
      if (c.value < 1) return Bad(key, "value", "must be >= 1, got " + std::to_string(c.value));
      break;
    case LengthDist::kUniform:
    case LengthDist::kZipf:
      if (c.max == 0) {
        return Bad(key, "max", std::string(c.dist == LengthDist::kZipf ? "zipf" : "uniform") +
                                   " needs max, the upper bound (>= min)");
      }
      if (c.max < c.min) {
        return Bad(key, "max", "must be >= min (" + std::to_string(c.min) + "), got " +
                                   std::to_string(c.max));
      }
      if (c.dist == LengthDist::kZipf) {
        if (!(c.theta > 0) || !std::isfinite(c.theta)) {
          return Bad(key, "theta", "must be > 0, got " + num(c.theta));
        }
        if (c.max - c.min + 1 > kMaxZipfValues) {
          return Bad(key, "max", "zipf supports at most 2^24 values in [min, max]");
        }
      }
      break;
    case LengthDist::kNormal:
      if (!(c.mean > 0) || !std::isfinite(c.mean)) {
        return Bad(key, "mean", "normal needs mean > 0, got " + num(c.mean));
      }
      if (!(c.std >= 0) || !std::isfinite(c.std)) {
        return Bad(key, "std", "must be >= 0, got " + num(c.std));
      }
      break;
    case LengthDist::kLognormal:
      if (!(c.mean > 0) || !std::isfinite(c.mean)) {
        return Bad(key, "mean", "lognormal needs mean > 0, got " + num(c.mean));
      }
      if (!(c.cv >= 0) || !std::isfinite(c.cv)) {
        return Bad(key, "cv", "must be >= 0, got " + num(c.cv));
      }
      break;
    case LengthDist::kEmpirical:
      if (c.path.empty()) return Bad(key, "path", "empirical needs a file path");
      break;
  }
  if (c.max > 0 && c.max < c.min) {
    return Bad(key, "max", "must be 0 (no bound) or >= min (" + std::to_string(c.min) +
                               "), got " + std::to_string(c.max));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<LengthDistribution> LengthDistribution::Make(const LengthDistConfig& config,
                                                      std::string_view key) {
  SERVELAB_RETURN_IF_ERROR(Validate(config, key));
  LengthDistribution d;
  d.config_ = config;
  d.lo_ = std::min<int64_t>(std::max<int64_t>(config.min, 1), kInt32Max);
  d.hi_ = config.max > 0 ? std::min<int64_t>(config.max, kInt32Max) : kInt32Max;
  switch (config.dist) {
    case LengthDist::kLognormal:
      d.log_params_ = LognormalLogParams(config.mean, config.cv);
      break;
    case LengthDist::kZipf: {
      const int64_t n = config.max - config.min + 1;
      d.zipf_cdf_.resize(static_cast<size_t>(n));
      double total = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        total += std::pow(static_cast<double>(config.min + i), -config.theta);
        d.zipf_cdf_[static_cast<size_t>(i)] = total;
      }
      for (double& p : d.zipf_cdf_) p /= total;
      d.zipf_cdf_.back() = 1.0;  // Uniform() < 1, so the search always lands inside
      break;
    }
    case LengthDist::kEmpirical: {
      auto values = ReadLengthColumn(config.path, config.column, key);
      if (!values.ok()) return values.status();
      d.rows_.reserve(values->size());
      for (int64_t v : *values) d.rows_.push_back(d.Clamp(static_cast<double>(v)));
      break;
    }
    default:
      break;
  }
  return d;
}

int32_t LengthDistribution::Clamp(double x) const {
  if (std::isnan(x)) return static_cast<int32_t>(lo_);
  const double r = std::round(x);
  if (r <= static_cast<double>(lo_)) return static_cast<int32_t>(lo_);
  if (r >= static_cast<double>(hi_)) return static_cast<int32_t>(hi_);
  return static_cast<int32_t>(r);
}

size_t LengthDistribution::SampleRow(Rng& rng) const {
  return static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(rows_.size()) - 1));
}

int32_t LengthDistribution::Sample(Rng& rng) const {
  switch (config_.dist) {
    case LengthDist::kFixed:
      return Clamp(static_cast<double>(config_.value));
    case LengthDist::kUniform:
      return Clamp(static_cast<double>(rng.UniformInt(config_.min, config_.max)));
    case LengthDist::kNormal:
      return Clamp(rng.Normal(config_.mean, config_.std));
    case LengthDist::kLognormal:
      return Clamp(rng.Lognormal(log_params_.mu, log_params_.sigma));
    case LengthDist::kZipf: {
      const double u = rng.Uniform();
      const auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
      return Clamp(static_cast<double>(config_.min + (it - zipf_cdf_.begin())));
    }
    case LengthDist::kEmpirical:
      return rows_[SampleRow(rng)];
  }
  return static_cast<int32_t>(lo_);
}

StatusOr<std::vector<int64_t>> ReadLengthColumn(const std::string& path,
                                                const std::string& column,
                                                std::string_view key) {
  auto file = LineFile::Open(path);
  if (!file.ok()) {
    return Status(file.status().code(), Key(key, "path") + ": " + file.status().message());
  }
  std::string line;
  std::vector<std::string_view> fields;
  std::vector<int64_t> values;
  size_t col = 0;                  // the sampled column's index
  std::string column_name;         // its header name ("" without a header)
  bool at_first_line = true;
  while (file->Next(line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    SplitCsvLine(line, fields);
    double value = 0;
    if (at_first_line) {
      at_first_line = false;
      if (!ParseDouble(fields[0], value)) {  // a header row: find the column by name
        column_name = column.empty() ? std::string(fields[0]) : column;
        auto found = FindColumn(fields, column_name, path, file->line_number());
        if (!found.ok()) {
          return InvalidArgument(found.status().message() + " (" + Key(key, "column") + ")");
        }
        col = *found;
        continue;
      }
      if (!column.empty()) {
        return InvalidArgument(Key(key, "column") + ": '" + path +
                               "' has no header row, so it has no column '" + column + "'");
      }
    }
    const std::string_view text = col < fields.size() ? fields[col] : std::string_view();
    if (!ParseDouble(text, value) || value < 0 || value > static_cast<double>(kInt32Max)) {
      const Status error = LineError(path, file->line_number(),
                                     "expected a length >= 0, got '" + std::string(text) + "'",
                                     column_name);
      return InvalidArgument(error.message() + " (" + std::string(key) + ")");
    }
    values.push_back(static_cast<int64_t>(std::llround(value)));
  }
  if (values.empty()) {
    return InvalidArgument(Key(key, "path") + ": '" + path + "' has no values");
  }
  return values;
}

}  // namespace servelab
