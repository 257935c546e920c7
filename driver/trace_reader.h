#pragma once
// Readers for request traces, and the small CSV helpers they share with empirical
// length distributions.
//
// Formats (columns are found by header name, in any order; extra columns are ignored):
//   azure      CSV  TIMESTAMP,ContextTokens,GeneratedTokens
//                   TIMESTAMP is wall-clock "YYYY-MM-DD HH:MM:SS[.fffffff]" (any number
//                   of fractional digits up to 9), read exactly to the nanosecond with our
//                   own calendar arithmetic (proleptic Gregorian, no time zone, no locale).
//   mooncake   JSONL one object per line: timestamp (ms), input_length, output_length,
//                   hash_ids (optional list of prefix-block ids, one per 512 tokens).
//   splitwise  CSV  arrived_at (seconds, a float), num_prefill_tokens, num_decode_tokens
//                   (vidur's processed traces; other columns allowed).
// Every reader accepts LF or CRLF line ends, a last line without a newline (the
// shipped Azure trace has none), and skips blank lines.
//
// What a reader returns:
//   - Arrival times relative to the earliest record: the first request is at t = 0.
//   - Records sorted by arrival. A trace that is not sorted is sorted stably, so records
//     with equal times keep their file order (Mooncake has many equal timestamps).
//   - Lengths >= 1: a record with 0 input or 0 output tokens is clamped to 1 (a request
//     must prefill at least one token and generate at least one). The shipped traces
//     never need this (minimum input/output: Azure conv 7/2, Mooncake 891/1), but user
//     traces may.
// A malformed line is an error naming it: "path:LINE: <what>, column 'X'" (1-based line
// numbers; the header is line 1). A missing file is NotFound; an empty trace is an error.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/read_file.h"
#include "core/status.h"
#include "core/time.h"
#include "driver/workload_config.h"

namespace servelab {

// Mooncake's prefix block: one hash id per 512 prompt tokens.
inline constexpr int32_t kMooncakeBlockTokens = 512;

struct TraceRecord {
  TimeNs arrival = 0;   // ns since the trace's first record
  int32_t prompt_len = 0;  // >= 1
  int32_t output_len = 0;  // >= 1
  std::vector<uint64_t> prefix_block_hashes;  // mooncake only; else empty
};

StatusOr<std::vector<TraceRecord>> ReadTrace(const std::string& path, TraceFormat format);
StatusOr<std::vector<TraceRecord>> ReadAzureTrace(const std::string& path);
StatusOr<std::vector<TraceRecord>> ReadMooncakeTrace(const std::string& path);
StatusOr<std::vector<TraceRecord>> ReadSplitwiseTrace(const std::string& path);

// Tokens per prefix block for records of this format (0: the format has no prefix ids).
int32_t TraceBlockTokens(TraceFormat format);

// "YYYY-MM-DD HH:MM:SS[.f...]" (or 'T' between date and time) as ns since
// 1970-01-01 00:00:00 of the same (unstated) time zone. Rejects out-of-range fields
// (month 13, Feb 30, hour 24, ...) and more than 9 fractional digits.
StatusOr<TimeNs> ParseTimestamp(std::string_view text);

// ---- CSV helpers (also used by empirical length distributions) ----

// A text file read line by line: LF or CRLF, last newline optional.
class LineFile {
 public:
  // NotFound when `path` cannot be opened; InvalidArgument past `max_bytes`.
  static StatusOr<LineFile> Open(const std::string& path, int64_t max_bytes = kMaxDataFileBytes);
  // The next line without its line end; false at end of file.
  bool Next(std::string& line);
  int64_t line_number() const { return line_number_; }  // of the last line returned, 1-based
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string text_;
  size_t pos_ = 0;
  int64_t line_number_ = 0;
};

// Splits one CSV line at commas into `fields` (views into `line`), trimming blanks and
// one pair of surrounding double quotes. Quoted commas are not supported (no format
// we read has them).
void SplitCsvLine(std::string_view line, std::vector<std::string_view>& fields);

// Index of `name` in `header` (read from line `line` of `path`), or an error
// "path:LINE: missing column 'name' (did you mean ...?) (columns: ...)".
StatusOr<size_t> FindColumn(const std::vector<std::string_view>& header, std::string_view name,
                            const std::string& path, int64_t line);

// Parses a whole field as a finite number / an integral number >= 0 that fits int32
// (written "12" or "12.0"); false otherwise. Locale-independent.
bool ParseDouble(std::string_view text, double& value);
bool ParseCount(std::string_view text, int32_t& value);

// "path:LINE: what, column 'X'" (", column ..." omitted when column is empty).
Status LineError(const std::string& path, int64_t line, std::string_view what,
                 std::string_view column = {});

}  // namespace servelab
