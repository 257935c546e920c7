#include "core/params.h"

#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/text.h"

namespace servelab {

const Param* ParamReader::Find(const std::string& key) {
  known_.push_back(key);
  for (const auto& p : named_.params) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

bool ParamReader::Has(const std::string& key) const {
  for (const auto& p : named_.params) {
    if (p.key == key) return true;
  }
  return false;
}

std::string ParamReader::Where(const std::string& key) const {
  std::string where = named_.where;
  for (const auto& p : named_.params) {
    if (p.key == key) where = p.where;
  }
  return (where.empty() ? "" : where + ": ") + named_.path + "." + key;
}

void ParamReader::Fail(const Param& param, const std::string& message) {
  if (!status_.ok()) return;
  status_ = InvalidArgument(param.where + ": " + named_.path + "." + param.key + ": " + message);
}

void ParamReader::Record(const std::string& key, std::string value, const Param* given) {
  resolved_.push_back(
      Param{key, std::move(value), given != nullptr ? given->where : named_.where});
}

double ParamReader::GetDouble(const std::string& key, double fallback, Bounds bounds) {
  const Param* p = Find(key);
  double value = fallback;
  if (p != nullptr) {
    const char* end = p->value.data() + p->value.size();
    auto [ptr, ec] = std::from_chars(p->value.data(), end, value);
    if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
      Fail(*p, "expected a number, got '" + p->value + "'");
      value = fallback;
    } else if (!bounds.Contains(value)) {
      Fail(*p, "value " + p->value + " out of range: must be " + bounds.Describe());
      value = fallback;
    }
  }
  Record(key, FormatDouble(value), p);
  return value;
}

int64_t ParamReader::GetInt(const std::string& key, int64_t fallback, Bounds bounds) {
  const Param* p = Find(key);
  int64_t value = fallback;
  if (p != nullptr) {
    const char* end = p->value.data() + p->value.size();
    auto [ptr, ec] = std::from_chars(p->value.data(), end, value);
    if (ec != std::errc() || ptr != end) {
      Fail(*p, "expected an integer, got '" + p->value + "'");
      value = fallback;
    } else if (!bounds.Contains(static_cast<double>(value))) {
      Fail(*p, "value " + p->value + " out of range: must be " + bounds.Describe());
      value = fallback;
    }
  }
  Record(key, std::to_string(value), p);
  return value;
}

bool ParamReader::GetBool(const std::string& key, bool fallback) {
  const Param* p = Find(key);
  bool value = fallback;
  if (p != nullptr) {
    if (p->value == "true") {
      value = true;
    } else if (p->value == "false") {
      value = false;
    } else {
      Fail(*p, "expected true or false, got '" + p->value + "'");
    }
  }
  Record(key, value ? "true" : "false", p);
  return value;
}

std::string ParamReader::GetString(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& allowed) {
  const Param* p = Find(key);
  std::string value = fallback;
  if (p != nullptr) {
    bool found = allowed.empty();
    for (const auto& a : allowed) found = found || a == p->value;
    if (found) {
      value = p->value;
    } else {
      Fail(*p, "'" + p->value + "' is not one of: " + Join(allowed, ", ") +
                   DidYouMean(p->value, allowed));
    }
  }
  Record(key, value, p);
  return value;
}

std::string ParamReader::GetPath(const std::string& key, const std::string& fallback) {
  const Param* p = Find(key);
  std::string value = fallback;
  if (p == nullptr && fallback.empty()) {
    if (status_.ok()) {
      status_ = InvalidArgument((named_.where.empty() ? "" : named_.where + ": ") + named_.path +
                                ": '" + named_.name + "' needs the parameter '" + key + "'");
    }
  } else if (p != nullptr) {
    if (p->value.empty()) {
      Fail(*p, "empty path");
    } else {
      std::filesystem::path path(p->value);
      if (path.is_relative() && !named_.base_dir.empty()) path = named_.base_dir / path;
      value = std::filesystem::absolute(path).lexically_normal().string();
    }
  }
  Record(key, value, p);
  return value;
}

Status ParamReader::Finish() {
  if (!status_.ok()) return status_;
  for (const auto& p : named_.params) {
    bool known = false;
    for (const auto& k : known_) known = known || k == p.key;
    if (!known) {
      std::string message = p.where + ": " + named_.path + ": unknown parameter '" + p.key +
                            "' for '" + named_.name + "'" + DidYouMean(p.key, known_);
      if (!known_.empty()) message += ". Its parameters are: " + Join(known_, ", ");
      else message += "; it takes no parameters";
      return InvalidArgument(message);
    }
  }
  return Status::Ok();
}

NamedParams ParamReader::Resolved() const {
  NamedParams resolved = named_;
  resolved.params = resolved_;
  return resolved;
}

}  // namespace servelab
