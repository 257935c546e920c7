#pragma once
// CsvWriter: formats one row at a time into a reusable buffer and writes it to an ostream
// in one call. Numbers go through std::to_chars (no locale, no iostream formatting, no
// allocation per row once the buffer has grown to the longest row), so output is fast
// and byte-identical across runs.
//
// Time formats (DESIGN.md "Time": int64 ns):
//   Seconds(ns)        exact decimal of ns / 1e9, trailing zeros trimmed: 1500000000 -> "1.5"
//   SecondsDouble(s)   s rounded to 9 decimals (1 ns), trailing zeros trimmed
#include <charconv>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace servelab {

// Appends the exact decimal form of value / 10^decimals, trailing fractional zeros
// trimmed: (1500000000, 9) -> "1.5", (2000, 3) -> "2". REQUIRES: 0 <= decimals <= 18.
inline void AppendDecimal(std::string& out, int64_t value, int decimals) {
  uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  char buf[48];
  char* p = buf;
  const uint64_t magnitude =
      value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  if (value < 0) *p++ = '-';
  p = std::to_chars(p, buf + sizeof(buf), magnitude / scale).ptr;
  uint64_t frac = magnitude % scale;
  if (frac != 0) {
    char digits[18];
    for (int i = decimals - 1; i >= 0; --i) {
      digits[i] = static_cast<char>('0' + frac % 10);
      frac /= 10;
    }
    int len = decimals;
    while (digits[len - 1] == '0') --len;
    *p++ = '.';
    for (int i = 0; i < len; ++i) *p++ = digits[i];
  }
  out.append(buf, p);
}

// Seconds from int64 ns, exact: 1500000000 -> "1.5".
inline void AppendSeconds(std::string& out, int64_t ns) { AppendDecimal(out, ns, 9); }

// Appends s with 9 decimals, trailing fractional zeros trimmed ("0.625", "2").
inline void AppendFixed9(std::string& out, double s) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), s, std::chars_format::fixed, 9);
  if (ec != std::errc()) {
    out.append("nan");
    return;
  }
  char* dot = buf;
  while (dot < p && *dot != '.') ++dot;
  if (dot < p) {
    while (p[-1] == '0') --p;
    if (p[-1] == '.') --p;
  }
  if (p - buf == 2 && buf[0] == '-' && buf[1] == '0') {  // "-0" after rounding
    out.push_back('0');
    return;
  }
  out.append(buf, p);
}

inline void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, p);
}

class CsvWriter {
 public:
  // `os` may be null: every call is then a no-op.
  explicit CsvWriter(std::ostream* os) : os_(os) { row_.reserve(256); }

  bool enabled() const { return os_ != nullptr; }

  CsvWriter& Int(int64_t v) { Sep(); AppendInt(row_, v); return *this; }
  CsvWriter& Seconds(int64_t ns) { Sep(); AppendSeconds(row_, ns); return *this; }
  CsvWriter& SecondsDouble(double s) { Sep(); AppendFixed9(row_, s); return *this; }
  CsvWriter& Empty() { Sep(); return *this; }
  // Quoted (RFC 4180) only when it holds a comma, quote or line break.
  CsvWriter& Str(std::string_view s) {
    Sep();
    if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
      row_.append(s);
      return *this;
    }
    row_.push_back('"');
    for (char c : s) {
      if (c == '"') row_.push_back('"');
      row_.push_back(c);
    }
    row_.push_back('"');
    return *this;
  }
  // Writes `line` and a '\n' as one row (a header).
  void Line(std::string_view line) {
    row_.assign(line);
    first_ = false;
    EndRow();
  }
  // Writes the row and a '\n'.
  void EndRow() {
    row_.push_back('\n');
    if (os_ != nullptr) os_->write(row_.data(), static_cast<std::streamsize>(row_.size()));
    row_.clear();
    first_ = true;
  }

 private:
  void Sep() {
    if (!first_) row_.push_back(',');
    first_ = false;
  }

  std::ostream* os_;
  std::string row_;
  bool first_ = true;
};

}  // namespace servelab
