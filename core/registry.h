#pragma once
// One registry per kind of extension (policies, cost models, routers): name -> factory,
// as ns-3 and SimGrid keep one per kind. Registration is explicit (RegisterBuiltin...),
// never static-init, so the linker keeps every entry.
//
// A factory reads its free parameters through the ParamReader it is handed (each Get*
// marks a key as known and falls back to the documented default); the registry then
// reports the first bad value or any key nobody read, with "did you mean", naming the
// file, line and key. An unknown name answers
//   "Unable to find policy 'foo'. Valid values are: a, b, c."
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fields.h"
#include "core/params.h"
#include "core/status.h"
#include "core/text.h"

namespace servelab {

template <class T, class... Context>
class Registry {
 public:
  using Factory =
      std::function<StatusOr<std::unique_ptr<T>>(ParamReader& params, const Context&... context)>;

  // `kind` names the extension in messages: "policy", "cost model", "router".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  void Register(std::string name, std::string summary, Factory factory) {
    entries_[std::move(name)] = Entry{std::move(summary), std::move(factory)};
  }

  // Builds `config.name` from its parameters. When `resolved` is given, it receives the
  // name and every parameter the factory read, given or defaulted, in reading order.
  StatusOr<std::unique_ptr<T>> Make(const NamedParams& config, const Context&... context,
                                    NamedParams* resolved = nullptr) const {
    auto it = entries_.find(config.name);
    if (it == entries_.end()) {
      const std::string where = config.where.empty() ? "" : config.where + ": ";
      return InvalidArgument(where + config.path + ": " +
                             UnknownNameMessage(kind_, config.name, Names()));
    }
    ParamReader params(config);
    auto made = it->second.factory(params, context...);
    SERVELAB_RETURN_IF_ERROR(params.Finish());
    if (!made.ok()) return made.status();
    if (resolved != nullptr) *resolved = params.Resolved();
    return made;
  }

  // Sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }
  // REQUIRES: `name` is registered.
  const std::string& Summary(const std::string& name) const { return entries_.at(name).summary; }

 private:
  struct Entry {
    std::string summary;
    Factory factory;
  };
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

// The registry of type R holding the built-in entries `register_builtins` adds, built
// once, on first use (one per registry type).
template <class R>
const R& BuiltinRegistry(const std::string& kind, void (*register_builtins)(R&)) {
  static const R* registry = [&] {
    auto* r = new R(kind);
    register_builtins(*r);
    return r;
  }();
  return *registry;
}

}  // namespace servelab
