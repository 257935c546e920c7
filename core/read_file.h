#pragma once
// Reading an input file whole, safely: only a regular file (a directory, FIFO, device or
// socket is an error naming it -- /dev/zero would never end, a FIFO would block), and
// only up to a size limit checked before anything is allocated.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace servelab {

// Limits per kind of input (bytes).
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;   // YAML, config.json
inline constexpr int64_t kMaxDataFileBytes = int64_t{2} << 30;      // traces, CSVs
// A profile's rows take about 12 times its text in memory (a row's shape and times, the
// fit's samples): 256 MiB of profile, ~3 GB; Vidur's profiles in ../shared are 0.7-2 MB.
inline constexpr int64_t kMaxProfileFileBytes = int64_t{256} << 20;

// The contents of `path`. `what` names the input in messages ("experiment file": "x.yaml:
// cannot open the experiment file: No such file or directory"). NotFound when it cannot be opened; InvalidArgument when it is not a regular
// file or is larger than `max_bytes`.
StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes,
                                      std::string_view what);

}  // namespace servelab
