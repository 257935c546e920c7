#include "driver/key_locations.h"

#include <algorithm>

namespace servelab {
namespace {

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '[' || c == ']';
}

// The parent of "a.b[2].c" is "a.b[2]", then "a.b", then "a", then "".
std::string_view Parent(std::string_view path) {
  const size_t cut = path.find_last_of(".[");
  return cut == std::string_view::npos ? std::string_view() : path.substr(0, cut);
}

}  // namespace

void KeyLocations::Record(std::string path, std::string where) {
  where_.insert_or_assign(std::move(path), std::move(where));
}

std::string KeyLocations::Label(std::string_view path) const {
  for (std::string_view p = path; !p.empty(); p = Parent(p)) {
    if (auto it = where_.find(p); it != where_.end()) return it->second + ": " + std::string(path);
  }
  return source_ + ": " + std::string(path);
}

Status KeyLocations::Locate(const Status& status, const std::vector<std::string>& roots) const {
  if (status.ok()) return status;
  const std::string& message = status.message();
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return status;
  const std::string_view key(message.data(), colon);
  if (!std::all_of(key.begin(), key.end(), IsKeyChar)) return status;
  const std::string_view root = key.substr(0, key.find_first_of(".["));
  if (std::find(roots.begin(), roots.end(), root) == roots.end()) return status;
  return Status(status.code(), Label(key) + message.substr(colon));
}

}  // namespace servelab
