#include "core/fields.h"

#include <sstream>

namespace servelab {

namespace {

// An integral bound exactly (16777216, not 1.67772e+07); others as the shortest %g.
struct Num {
  double v;
};
std::ostream& operator<<(std::ostream& out, Num n) {
  if (n.v == static_cast<double>(static_cast<long long>(n.v)) && n.v > -1e18 && n.v < 1e18) {
    return out << static_cast<long long>(n.v);
  }
  return out << n.v;
}

}  // namespace

std::string Bounds::Describe() const {
  std::ostringstream out;
  const bool has_lo = lo != -kInf;
  const bool has_hi = hi != kInf;
  if (has_lo && has_hi) {
    out << "in " << (lo_open ? "(" : "[") << Num{lo} << ", " << Num{hi} << (hi_open ? ")" : "]");
  } else if (has_lo) {
    out << (lo_open ? "> " : ">= ") << Num{lo};
  } else if (has_hi) {
    out << (hi_open ? "< " : "<= ") << Num{hi};
  } else {
    out << "any value";
  }
  return out.str();
}

std::string BoundsCheck::FormatBoundValue(double v) {
  std::ostringstream out;
  out << Num{v};
  return out.str();
}

}  // namespace servelab
