#pragma once
// Vidur's profile layouts (driver/profile_table.h describes both): its mlp.csv and
// attention.csv, read into servelab's profile rows. Internal to ReadProfile.
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "driver/profile_table.h"
#include "driver/trace_reader.h"

namespace servelab {

// A catalog GPU named by a token of the file name: "vidur_a100_x.csv" -> "a100-80gb"; ""
// when none is.
std::string VidurDeviceFromName(const std::string& path);

// The rows of a Vidur mlp.csv / attention.csv whose `header` was read, on `device`, into
// `table`. Errors name file, line and column.
Status ReadVidurMlp(LineFile& file, const std::vector<std::string_view>& header,
                    const std::string& device, ProfileTable& table);
Status ReadVidurAttention(LineFile& file, const std::vector<std::string_view>& header,
                          const std::string& device, ProfileTable& table);

}  // namespace servelab
