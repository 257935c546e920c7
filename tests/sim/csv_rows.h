#pragma once
// Reading result CSVs back in tests: rows of fields (no quoting: servelab's numeric
// columns and plain names), and a column's index by its header name.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace servelab::testing {

// Splits a CSV (header + rows) into rows of fields; a trailing comma is an empty field.
inline std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream l(line);
    while (std::getline(l, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.push_back("");
    rows.push_back(fields);
  }
  return rows;
}

// The index of column `name` in `header` (a test failure, and 0, when there is none).
inline int Column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

}  // namespace servelab::testing
