#pragma once
// Status / StatusOr for boundaries (YAML, CLI, trace and model files): a failure is a
// value carrying a message that names the file, line and key. CHECK is for invariants
// inside: it aborts with file:line because a failed CHECK is a bug, not bad input.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace servelab {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input: config, CLI usage, trace or model file (exit 2)
  kNotFound,         // a named thing (file, catalog entry) does not exist (exit 2)
  kInternal,         // a runtime failure (exit 1)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // True for a failure the user caused (bad input): the CLI exits 2 for these, 1 otherwise.
  bool IsBadInput() const {
    return code_ == StatusCode::kInvalidArgument || code_ == StatusCode::kNotFound;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

// A value or the Status explaining why there is none.
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr built from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace servelab

#define SERVELAB_CHECK(cond)                                                          \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

#define SERVELAB_CHECK_MSG(cond, msg)                                                 \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(msg).c_str());                                         \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

// Returns early from the enclosing function when `expr` is a failed Status.
#define SERVELAB_RETURN_IF_ERROR(expr)        \
  do {                                        \
    ::servelab::Status _st = (expr);          \
    if (!_st.ok()) return _st;                \
  } while (0)
