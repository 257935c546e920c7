#include "driver/trace_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "core/text.h"

namespace servelab {
namespace {

// ---- Calendar arithmetic (proleptic Gregorian) ----

bool IsLeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeapYear(y) ? 29 : kDays[m - 1];
}

// Days from 0001-01-01 to y-01-01. REQUIRES: y >= 1.
int64_t DaysBeforeYear(int64_t y) {
  const int64_t p = y - 1;
  return 365 * p + p / 4 - p / 100 + p / 400;
}

// Days from 1970-01-01 to y-m-d (negative before 1970).
int64_t DaysSinceEpoch(int64_t y, int m, int d) {
  int64_t days = DaysBeforeYear(y) - DaysBeforeYear(1970);
  for (int month = 1; month < m; ++month) days += DaysInMonth(y, month);
  return days + (d - 1);
}

// Reads exactly `width` decimal digits at text[pos], advancing pos.
bool ReadDigits(std::string_view text, size_t& pos, size_t width, int64_t& value) {
  if (pos + width > text.size()) return false;
  value = 0;
  for (size_t i = 0; i < width; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  pos += width;
  return true;
}

bool Expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// ---- Shared reader tail ----

// Sorts stably by arrival, makes times relative to the first record, clamps lengths.
StatusOr<std::vector<TraceRecord>> Finish(std::vector<TraceRecord> records,
                                          const std::string& path) {
  if (records.empty()) return InvalidArgument(path + ": the trace has no records");
  const auto by_arrival = [](const TraceRecord& a, const TraceRecord& b) {
    return a.arrival < b.arrival;
  };
  if (!std::is_sorted(records.begin(), records.end(), by_arrival)) {
    std::stable_sort(records.begin(), records.end(), by_arrival);
  }
  const TimeNs first = records.front().arrival;
  TimeNs span = 0;
  if (__builtin_sub_overflow(records.back().arrival, first, &span) || span > kMaxTime) {
    return InvalidArgument(path + ": the trace spans more than " +
                           std::to_string(ToSeconds(kMaxTime)) + " s (about 126 years)");
  }
  for (TraceRecord& r : records) {
    r.arrival -= first;
    r.prompt_len = std::max(r.prompt_len, 1);
    r.output_len = std::max(r.output_len, 1);
  }
  return records;
}

Status CountError(const LineFile& file, std::string_view text, std::string_view column) {
  return LineError(file.path(), file.line_number(),
                   "expected a token count >= 0, got '" + std::string(text) + "'", column);
}

// The CSV formats differ only in their column names and how the time is written.
enum class TimeColumn { kTimestamp, kSeconds };

StatusOr<std::vector<TraceRecord>> ReadCsvTrace(const std::string& path,
                                                std::string_view time_name, TimeColumn kind,
                                                std::string_view prompt_name,
                                                std::string_view output_name) {
  auto file = LineFile::Open(path);
  if (!file.ok()) return file.status();
  std::string line;
  bool has_header = false;
  while (!has_header && file->Next(line)) has_header = !line.empty();
  if (!has_header) return InvalidArgument(path + ": the trace is empty (no header line)");
  std::vector<std::string_view> fields;
  SplitCsvLine(line, fields);
  size_t cols[3] = {0, 0, 0};  // time, prompt, output
  const std::string_view names[3] = {time_name, prompt_name, output_name};
  for (int i = 0; i < 3; ++i) {
    auto found = FindColumn(fields, names[i], path, file->line_number());
    if (!found.ok()) return found.status();
    cols[i] = *found;
  }
  const size_t time_col = cols[0], prompt_col = cols[1], output_col = cols[2];

  std::vector<TraceRecord> records;
  while (file->Next(line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    SplitCsvLine(line, fields);
    const auto field = [&](size_t col) {
      return col < fields.size() ? fields[col] : std::string_view();
    };
    for (int i = 0; i < 3; ++i) {
      if (field(cols[i]).empty()) {
        return LineError(path, file->line_number(), "missing value", names[i]);
      }
    }
    TraceRecord record;
    const std::string_view time_text = field(time_col);
    if (kind == TimeColumn::kTimestamp) {
      auto t = ParseTimestamp(time_text);
      if (!t.ok()) {
        return LineError(path, file->line_number(), t.status().message(), time_name);
      }
      record.arrival = *t;
    } else {
      double seconds = 0;
      if (!ParseDouble(time_text, seconds) || !(seconds >= 0) ||
          seconds > ToSeconds(kMaxTime)) {
        return LineError(path, file->line_number(),
                         "expected a time in seconds in [0, " + std::to_string(ToSeconds(kMaxTime)) +
                             "], got '" + std::string(time_text) + "'",
                         time_name);
      }
      record.arrival = FromSeconds(seconds);
    }
    if (!ParseCount(field(prompt_col), record.prompt_len)) {
      return CountError(*file, field(prompt_col), prompt_name);
    }
    if (!ParseCount(field(output_col), record.output_len)) {
      return CountError(*file, field(output_col), output_name);
    }
    records.push_back(std::move(record));
  }
  return Finish(std::move(records), path);
}

// A JSON number that is an integer in [0, max] (an integral float such as 12.0 counts).
bool JsonCount(const nlohmann::json& value, int64_t max, int64_t& out) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(max)) return false;
    out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) return false;  // signed => negative
  if (!value.is_number_float()) return false;
  const double v = value.get<double>();
  if (!(v >= 0) || v > static_cast<double>(max) || v != std::floor(v)) return false;
  out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

StatusOr<TimeNs> ParseTimestamp(std::string_view text) {
  size_t pos = 0;
  int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const bool shape_ok = ReadDigits(text, pos, 4, year) && Expect(text, pos, '-') &&
                        ReadDigits(text, pos, 2, month) && Expect(text, pos, '-') &&
                        ReadDigits(text, pos, 2, day) &&
                        (Expect(text, pos, ' ') || Expect(text, pos, 'T')) &&
                        ReadDigits(text, pos, 2, hour) && Expect(text, pos, ':') &&
                        ReadDigits(text, pos, 2, minute) && Expect(text, pos, ':') &&
                        ReadDigits(text, pos, 2, second);
  const auto bad = [&](std::string_view why) {
    return InvalidArgument("bad timestamp '" + std::string(text) + "' (" + std::string(why) + ")");
  };
  if (!shape_ok) return bad("expected YYYY-MM-DD HH:MM:SS.fffffff");
  int64_t fraction_ns = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = kNsPerSec;
    const size_t first_digit = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (pos - first_digit == 9) return bad("more than 9 fractional digits");
      scale /= 10;
      fraction_ns += (text[pos] - '0') * scale;
      ++pos;
    }
    if (pos == first_digit) return bad("no digits after '.'");
  }
  if (pos != text.size()) return bad("trailing characters");
  if (year < 1 || month < 1 || month > 12 || day < 1 ||
      day > DaysInMonth(year, static_cast<int>(month)) || hour > 23 || minute > 59 ||
      second > 59) {
    return bad("field out of range");
  }
  const int64_t days = DaysSinceEpoch(year, static_cast<int>(month), static_cast<int>(day));
  const int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second;
  // Nanoseconds since 1970 in an int64 (years 1678 to 2262); Finish() bounds the span.
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / kNsPerSec - 1;
  if (seconds < -kMaxSeconds || seconds >= kMaxSeconds) return bad("year out of range 1678-2262");
  return seconds * kNsPerSec + fraction_ns;
}

StatusOr<std::vector<TraceRecord>> ReadAzureTrace(const std::string& path) {
  return ReadCsvTrace(path, "TIMESTAMP", TimeColumn::kTimestamp, "ContextTokens",
                      "GeneratedTokens");
}

StatusOr<std::vector<TraceRecord>> ReadSplitwiseTrace(const std::string& path) {
  return ReadCsvTrace(path, "arrived_at", TimeColumn::kSeconds, "num_prefill_tokens",
                      "num_decode_tokens");
}

StatusOr<std::vector<TraceRecord>> ReadMooncakeTrace(const std::string& path) {
  auto file = LineFile::Open(path);
  if (!file.ok()) return file.status();
  std::vector<TraceRecord> records;
  std::string line;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  while (file->Next(line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const int64_t n = file->line_number();
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) return LineError(path, n, "invalid JSON");
    if (!row.is_object()) return LineError(path, n, "expected a JSON object");
    for (const char* key : {"timestamp", "input_length", "output_length"}) {
      if (!row.contains(key)) return LineError(path, n, "missing value", key);
    }
    TraceRecord record;
    const nlohmann::json& ts = row["timestamp"];
    int64_t count = 0;
    if (JsonCount(ts, kMaxTime / kNsPerMs, count)) {
      record.arrival = count * kNsPerMs;  // exact for integer milliseconds
    } else if (ts.is_number_float() && ts.get<double>() >= 0 &&
               ts.get<double>() < ToSeconds(kMaxTime) * 1e3) {
      record.arrival = std::llround(ts.get<double>() * static_cast<double>(kNsPerMs));
    } else {
      return LineError(path, n,
                       "expected a time in ms in [0, " + std::to_string(kMaxTime / kNsPerMs) +
                           "], got " + ts.dump(),
                       "timestamp");
    }
    const auto length = [&](const char* key, int32_t& out) {
      if (!JsonCount(row[key], kInt32Max, count)) {
        return LineError(path, n, "expected a token count >= 0, got " + row[key].dump(), key);
      }
      out = static_cast<int32_t>(count);
      return Status::Ok();
    };
    SERVELAB_RETURN_IF_ERROR(length("input_length", record.prompt_len));
    SERVELAB_RETURN_IF_ERROR(length("output_length", record.output_len));
    if (row.contains("hash_ids")) {
      const nlohmann::json& ids = row["hash_ids"];
      if (!ids.is_array()) return LineError(path, n, "expected a list of ids", "hash_ids");
      record.prefix_block_hashes.reserve(ids.size());
      for (const nlohmann::json& id : ids) {
        if (!id.is_number_unsigned()) {
          return LineError(path, n, "expected ids >= 0, got " + id.dump(), "hash_ids");
        }
        record.prefix_block_hashes.push_back(id.get<uint64_t>());
      }
      // One id per 512-token block, the last one partial (the trace's README).
      const int64_t blocks = (int64_t{record.prompt_len} + kMooncakeBlockTokens - 1) /
                             kMooncakeBlockTokens;
      if (static_cast<int64_t>(ids.size()) != blocks) {
        return LineError(path, n,
                         "expected " + std::to_string(blocks) + " ids (one per " +
                             std::to_string(kMooncakeBlockTokens) + " tokens of input_length " +
                             std::to_string(record.prompt_len) + "), got " +
                             std::to_string(ids.size()),
                         "hash_ids");
      }
    }
    records.push_back(std::move(record));
  }
  return Finish(std::move(records), path);
}

StatusOr<std::vector<TraceRecord>> ReadTrace(const std::string& path, TraceFormat format) {
  switch (format) {
    case TraceFormat::kAzure: return ReadAzureTrace(path);
    case TraceFormat::kMooncake: return ReadMooncakeTrace(path);
    case TraceFormat::kSplitwise: return ReadSplitwiseTrace(path);
  }
  return InvalidArgument(path + ": unknown trace format");
}

int32_t TraceBlockTokens(TraceFormat format) {
  return format == TraceFormat::kMooncake ? kMooncakeBlockTokens : 0;
}

// ---- CSV helpers ----

StatusOr<LineFile> LineFile::Open(const std::string& path, int64_t max_bytes) {
  auto text = ReadRegularFile(path, max_bytes, "data file");
  if (!text.ok()) return text.status();
  LineFile file;
  file.path_ = path;
  file.text_ = std::move(text).value();
  // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first header name.
  if (file.text_.starts_with("\xEF\xBB\xBF")) file.pos_ = 3;
  return file;
}

bool LineFile::Next(std::string& line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string::npos) end = text_.size();
  size_t stop = end;
  if (stop > pos_ && text_[stop - 1] == '\r') --stop;
  line.assign(text_, pos_, stop - pos_);
  pos_ = end + 1;
  ++line_number_;
  return true;
}

void SplitCsvLine(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    std::string_view field = line.substr(start, comma == std::string_view::npos
                                                    ? std::string_view::npos
                                                    : comma - start);
    const size_t first = field.find_first_not_of(" \t");
    field = first == std::string_view::npos ? std::string_view() : field.substr(first);
    field = field.substr(0, field.find_last_not_of(" \t") + 1);
    if (field.size() >= 2 && field.front() == '"' && field.back() == '"') {
      field = field.substr(1, field.size() - 2);
    }
    fields.push_back(field);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

StatusOr<size_t> FindColumn(const std::vector<std::string_view>& header, std::string_view name,
                            const std::string& path, int64_t line) {
  std::vector<std::string> names;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
    names.emplace_back(header[i]);
  }
  return LineError(path, line,
                   "missing column '" + std::string(name) + "'" + DidYouMean(name, names) +
                       " (columns: " + Join(names, ", ") + ")");
}

bool ParseDouble(std::string_view text, double& value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

bool ParseCount(std::string_view text, int32_t& value) {
  int64_t whole = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), whole);
  if (error == std::errc() && end == text.data() + text.size() && !text.empty()) {
    if (whole < 0 || whole > std::numeric_limits<int32_t>::max()) return false;
    value = static_cast<int32_t>(whole);
    return true;
  }
  double real = 0;
  if (!ParseDouble(text, real) || real < 0 || real != std::floor(real) ||
      real > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  value = static_cast<int32_t>(real);
  return true;
}

Status LineError(const std::string& path, int64_t line, std::string_view what,
                 std::string_view column) {
  std::string message = path + ":" + std::to_string(line) + ": " + std::string(what);
  if (!column.empty()) message += ", column '" + std::string(column) + "'";
  return InvalidArgument(std::move(message));
}

}  // namespace servelab
