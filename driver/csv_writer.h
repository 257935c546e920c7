#pragma once
// CsvWriter: formats one row at a time into a reusable buffer and writes it to an ostream
// in one call. Numbers go through std::to_chars (no locale, no iostream formatting, no
// allocation per row once the buffer has grown to the longest row), so output is fast
// and byte-identical across runs.
//
// Time formats (DESIGN.md "Time": int64 ns):
//   Seconds(ns)        exact decimal of ns / 1e9, trailing zeros trimmed: 1500000000 -> "1.5"
//   SecondsDouble(s)   s rounded to 9 decimals (1 ns), trailing zeros trimmed
#include <algorithm>
#include <charconv>
#include <cstring>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace servelab {

// Writes the exact decimal form of value / 10^decimals at `p` (at most 40 chars), trailing
// fractional zeros trimmed: (1500000000, 9) -> "1.5", (2000, 3) -> "2"; returns the end.
// REQUIRES: 0 <= decimals <= 18.
inline char* WriteDecimal(char* p, int64_t value, int decimals) {
  uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const uint64_t magnitude =
      value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  if (value < 0) *p++ = '-';
  p = std::to_chars(p, p + 20, magnitude / scale).ptr;
  uint64_t frac = magnitude % scale;
  if (frac != 0) {
    // The `decimals` digits, zero-padded, two at a time from the right; then the
    // trailing zeros dropped (a step's start and duration pass here for every row).
    static constexpr char kPairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    *p++ = '.';
    char* end = p + decimals;
    char* q = end;
    while (q - p >= 2) {
      q -= 2;
      std::memcpy(q, kPairs + 2 * (frac % 100), 2);
      frac /= 100;
    }
    if (q > p) *--q = static_cast<char>('0' + frac % 10);
    while (end[-1] == '0') --end;  // stops at a digit: the fraction was not 0
    p = end;
  }
  return p;
}

inline void AppendDecimal(std::string& out, int64_t value, int decimals) {
  char buf[48];
  out.append(buf, WriteDecimal(buf, value, decimals));
}

// Seconds from int64 ns, exact: 1500000000 -> "1.5".
inline void AppendSeconds(std::string& out, int64_t ns) { AppendDecimal(out, ns, 9); }

// Writes s with 9 decimals at `p` (at most 64 chars), trailing fractional zeros trimmed
// ("0.625", "2"); returns the end.
inline char* WriteFixed9(char* p, double s) {
  char* const begin = p;
  auto [end, ec] = std::to_chars(p, p + 64, s, std::chars_format::fixed, 9);
  if (ec != std::errc()) {
    std::memcpy(p, "nan", 3);
    return p + 3;
  }
  char* dot = begin;
  while (dot < end && *dot != '.') ++dot;
  if (dot < end) {
    while (end[-1] == '0') --end;
    if (end[-1] == '.') --end;
  }
  if (end - begin == 2 && begin[0] == '-' && begin[1] == '0') {  // "-0" after rounding
    *begin = '0';
    return begin + 1;
  }
  return end;
}

inline void AppendFixed9(std::string& out, double s) {
  char buf[64];
  out.append(buf, WriteFixed9(buf, s));
}

inline void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, p);
}

class CsvWriter {
 public:
  // `os` may be null: every call is then a no-op.
  explicit CsvWriter(std::ostream* os) : os_(os) {
    buf_.resize(256);
    p_ = buf_.data();
  }
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  bool enabled() const { return os_ != nullptr; }

  CsvWriter& Int(int64_t v) {
    Field(24);
    p_ = std::to_chars(p_, p_ + 24, v).ptr;
    return *this;
  }
  CsvWriter& Seconds(int64_t ns) {
    Field(48);
    p_ = WriteDecimal(p_, ns, 9);
    return *this;
  }
  CsvWriter& SecondsDouble(double s) {
    Field(64);
    p_ = WriteFixed9(p_, s);
    return *this;
  }
  CsvWriter& Empty() {
    Field(0);
    return *this;
  }
  // Quoted (RFC 4180) only when it holds a comma, quote or line break.
  CsvWriter& Str(std::string_view s) {
    Field(2 * s.size() + 2);
    if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
      std::memcpy(p_, s.data(), s.size());
      p_ += s.size();
      return *this;
    }
    *p_++ = '"';
    for (char c : s) {
      if (c == '"') *p_++ = '"';
      *p_++ = c;
    }
    *p_++ = '"';
    return *this;
  }
  // Writes `line` and a '\n' as one row (a header).
  void Line(std::string_view line) {
    Reserve(line.size());
    std::memcpy(p_, line.data(), line.size());
    p_ += line.size();
    EndRow();
  }
  // Writes the row and a '\n'.
  void EndRow() {
    Reserve(1);
    *p_++ = '\n';
    if (os_ != nullptr) os_->write(buf_.data(), p_ - buf_.data());
    p_ = buf_.data();
    first_ = true;
  }

 private:
  // Room for a separator and `n` more chars.
  void Field(size_t n) {
    Reserve(n + 1);
    if (!first_) *p_++ = ',';
    first_ = false;
  }
  void Reserve(size_t n) {
    const auto used = static_cast<size_t>(p_ - buf_.data());
    if (buf_.size() - used >= n) return;
    buf_.resize(std::max(2 * buf_.size(), used + n));
    p_ = buf_.data() + used;
  }

  std::ostream* os_;
  std::vector<char> buf_;  // the row being formatted: [data, p_)
  char* p_;
  bool first_ = true;
};

}  // namespace servelab
