#pragma once
// Config structs are plain data. Each lists its fields once, in
//
//   template <class V> void VisitFields(V& v) { v.Field("key", member, bounds); ... }
//
// and every consumer is a visitor over that list: the YAML parser (strict: unknown keys,
// types, bounds, duplicates), the resolved-config writer, and the tests. Defaults are the
// member initializers, documented where they are declared.
//
// A visitor provides:
//   Field(key, T& value, Bounds = {})   T in {bool, int32_t, int64_t, double, std::string}
//   Path(key, std::string& value)        a file path; relative paths resolve against the
//                                        experiment file's folder
//   Enum(key, E& value, EnumNames<E>)
//   Section(key, S& section)             S has VisitFields
//   OptionalSection(key, S& section, bool& present)
//   List(key, std::vector<S>& items)     each S has VisitFields
//   Named(key, NamedParams& value, name_key = "name", name_required = true)
//                                        "name" or {<name_key>: ..., <free parameters>};
//                                        without name_required a mapping may omit the
//                                        name and keep the default one
//   Catalog(key, ModelSpec& or GpuSpec&) a catalog name, or a mapping (optionally with
//                                        `base: <catalog name>`) giving the fields
// The parser visits fields in order, so a VisitFields may branch on a field it already
// visited (e.g. a distribution's `dist` selects which parameters exist).
#include <limits>
#include <type_traits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servelab {

struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  // lo itself is out of range
  bool hi_open = false;

  bool Contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
  std::string Describe() const;  // e.g. "> 0", "in [0, 1]"
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr Bounds kAny{};
inline constexpr Bounds kPositive{0.0, kInf, true, false};
inline constexpr Bounds kNonNegative{0.0, kInf, false, false};
inline constexpr Bounds kAtLeastOne{1.0, kInf, false, false};
inline constexpr Bounds kUnitInterval{0.0, 1.0, false, false};      // [0, 1]
inline constexpr Bounds kOpenUnitInterval{0.0, 1.0, true, false};  // (0, 1]

template <class E>
struct EnumName {
  std::string_view name;
  E value;
};
template <class E>
using EnumNames = std::span<const EnumName<E>>;

template <class E>
std::string_view NameOf(EnumNames<E> names, E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

// A free-form parameter of a named extension (a policy, a router): its registry, not the
// config parser, knows which keys exist. Values keep their source location so the
// registry's errors can name file, line and key.
struct Param {
  std::string key;
  std::string value;   // the YAML scalar as written (lists and maps are not parameters)
  std::string where;   // "exp.yaml:12" or "--set scheduler.policy.sigma"
};

// "fcfs" or {name: priority, aging_s: 10}.
struct NamedParams {
  std::string name;
  std::vector<Param> params;
  std::string path;    // dotted config path of this value, for messages
  std::string where;   // source location of the name
  std::string base_dir;  // relative path parameters resolve against (the YAML's folder)
};

// The bounds of a struct's numeric fields, checked without the YAML layer (for values
// that come from command-line flags): the first field out of its range, or NaN, is
// `error` ("tensor_parallel: value 0 out of range: must be in [1, 64]"). Visits only
// Field(); a VisitFields that branches on enums or sections sees their defaults.
struct BoundsCheck {
  std::string error;

  template <class T>
  void Field(const std::string& key, T& value, Bounds bounds = kAny) {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const auto v = static_cast<double>(value);
      if (error.empty() && !bounds.Contains(v)) {
        error = key + ": value " + FormatBoundValue(v) + " out of range: must be " +
                bounds.Describe();
      }
    }
  }
  template <class... A> void Path(A&&...) {}
  template <class... A> void Enum(A&&...) {}
  template <class... A> void Section(A&&...) {}
  template <class... A> void OptionalSection(A&&...) {}
  template <class... A> void List(A&&...) {}
  template <class... A> void Named(A&&...) {}
  template <class... A> void Catalog(A&&...) {}

  static std::string FormatBoundValue(double v);
};

// The keys a struct's VisitFields lists, in order (one level: sections are not entered).
struct KeyNames {
  std::vector<std::string> keys;

  template <class... A> void Field(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void Path(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void Enum(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void Section(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void OptionalSection(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void List(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void Named(const std::string& key, A&&...) { keys.push_back(key); }
  template <class... A> void Catalog(const std::string& key, A&&...) { keys.push_back(key); }
};

}  // namespace servelab
