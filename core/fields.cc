#include "core/fields.h"

#include <sstream>

namespace servelab {

std::string Bounds::Describe() const {
  std::ostringstream out;
  const bool has_lo = lo != -kInf;
  const bool has_hi = hi != kInf;
  if (has_lo && has_hi) {
    out << "in " << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
  } else if (has_lo) {
    out << (lo_open ? "> " : ">= ") << lo;
  } else if (has_hi) {
    out << (hi_open ? "< " : "<= ") << hi;
  } else {
    out << "any value";
  }
  return out.str();
}

}  // namespace servelab
