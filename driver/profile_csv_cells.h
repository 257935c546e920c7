#pragma once
// Reading a profile CSV's cells, for the readers of driver/profile_table.cc (servelab's
// layout) and driver/vidur_profile.cc (Vidur's two): columns by header name, numbers and
// counts within their bounds, and every error naming file, line and column. Internal to
// the driver's profile readers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/text.h"
#include "driver/trace_reader.h"

namespace servelab::profile_csv {

// Where an optional column is, if the header has it.
inline std::optional<size_t> OptionalColumn(const std::vector<std::string_view>& header,
                                            std::string_view name) {
  const auto at = std::find(header.begin(), header.end(), name);
  if (at == header.end()) return std::nullopt;
  return static_cast<size_t>(at - header.begin());
}

inline bool HasColumn(const std::vector<std::string_view>& header, std::string_view name) {
  return OptionalColumn(header, name).has_value();
}

// Reads the named cells of one line: numbers, counts, strings, each naming its column.
class Cells {
 public:
  Cells(const std::string& path, int64_t line, const std::vector<std::string_view>& fields)
      : path_(path), line_(line), fields_(fields) {}

  // A number in [0, kMaxNumber]: times in ms (10^7 ms, near three hours, is longer than
  // any op or step; a fit squares relative errors of them) and experts' counts.
  static constexpr double kMaxNumber = 1e7;
  Status Number(size_t column, std::string_view name, double& out) const {
    SERVELAB_RETURN_IF_ERROR(Present(column, name));
    if (!ParseDouble(fields_[column], out) || out < 0) {
      return LineError(path_, line_, "expected a number >= 0, got '" +
                                         std::string(fields_[column]) + "'", name);
    }
    if (out > kMaxNumber) {
      return LineError(path_, line_, "expected a number <= 10000000, got '" +
                                         std::string(fields_[column]) + "'", name);
    }
    return Status::Ok();
  }
  // A whole number in [min, most]: `most` keeps what is computed from it (a row's
  // sequences, its shape's GEMMs) within the bounds an experiment's own keys have.
  Status Count(size_t column, std::string_view name, int64_t& out, int64_t min = 0,
               int64_t most = kMaxCount) const {
    SERVELAB_RETURN_IF_ERROR(Present(column, name));
    int32_t value = 0;
    if (!ParseCount(fields_[column], value) || value < min || value > most) {
      return LineError(path_, line_, "expected a whole number in [" + std::to_string(min) + ", " +
                                         std::to_string(most) + "], got '" +
                                         std::string(fields_[column]) + "'", name);
    }
    out = value;
    return Status::Ok();
  }
  // Bounds of the columns, as the experiment's keys of the same meaning have them
  // (ModelSpec's, SchedulerConfig's max_num_seqs and max_num_batched_tokens, tp 1-64).
  static constexpr int64_t kMaxCount = INT32_MAX;
  static constexpr int64_t kMaxHidden = 1 << 20, kMaxHeads = 1 << 14, kMaxWidth = 1 << 22,
                           kMaxVocab = 1 << 24, kMaxLayers = 1 << 14, kMaxTokens = 1 << 26,
                           kMaxBatch = 1 << 20, kMaxContext = 1 << 26, kMaxTp = 64;
  bool Empty(size_t column) const { return column < fields_.size() && fields_[column].empty(); }
  const std::string& Path() const { return path_; }
  int64_t Line() const { return line_; }
  std::string_view Text(size_t column) const { return fields_[column]; }
  Status Present(size_t column, std::string_view name) const {
    if (column >= fields_.size()) {
      return LineError(path_, line_,
                       "missing field (" + std::to_string(fields_.size()) + " fields)", name);
    }
    return Status::Ok();
  }

 private:
  const std::string& path_;
  int64_t line_;
  const std::vector<std::string_view>& fields_;
};

using Columns = std::map<std::string, size_t>;

inline StatusOr<Columns> Find(const std::vector<std::string_view>& header,
                              const std::vector<std::string>& names, const std::string& path) {
  Columns columns;
  for (const std::string& name : names) {
    auto at = FindColumn(header, name, path, 1);
    if (!at.ok()) return at.status();
    columns[name] = *at;
  }
  return columns;
}

// Calls `read` with the cells of every non-empty line after the header, in order; the
// first error ends the reading. A line of more fields than the header's `columns` is an
// error (a shifted or merged row; a missing field is said where a column reads it).
template <typename Read>
Status ForEachDataLine(LineFile& file, size_t columns, Read&& read) {
  std::string line;
  std::vector<std::string_view> fields;
  while (file.Next(line)) {
    if (line.empty()) continue;
    SplitCsvLine(line, fields);
    if (fields.size() > columns) {
      return LineError(file.path(), file.line_number(),
                       std::to_string(fields.size()) + " fields, more than the header's " +
                           std::to_string(columns));
    }
    SERVELAB_RETURN_IF_ERROR(read(Cells(file.path(), file.line_number(), fields)));
  }
  return Status::Ok();
}

}  // namespace servelab::profile_csv
